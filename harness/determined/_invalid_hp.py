"""An uncaught ``det.InvalidHP`` ends the trial as invalid instead of failed.

User scripts raise it anywhere (Determined's contract), so it is caught where every script
ends: the interpreter's excepthook. The hook tells the master about the early exit, then
lets the default hook print the traceback; the process still exits non-zero, and the
master, knowing the reason, does not restart the trial.
"""

from __future__ import annotations

import os
import sys
from types import TracebackType


def _report(info_env: dict[str, str]) -> None:
    # Imported here: `import determined` must stay fast for every task.
    from determined.api import lite as v1
    from determined.common import client

    address = info_env["DET_MASTER"]
    channel = client.blocking_channel(address)
    try:
        stub = v1.stub(channel.unary, metadata=client.metadata(info_env.get("DET_SESSION_TOKEN")))
        req = v1.ReportTrialEarlyExitRequest(
            trial_id=int(info_env["DET_TRIAL_ID"]), reason="invalid_hp"
        )
        try:
            stub.report_trial_early_exit(req, timeout=30)
        except Exception as e:
            raise client.translate(e, address) or e from None
    finally:
        channel.close()


def install(invalid_hp: type[BaseException]) -> None:
    """Install the hook; it acts in a trial's process, as its environment says when the
    exception comes (a launcher started ahead of its task imports ``determined`` first)."""
    previous = sys.excepthook

    def hook(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
        env = dict(os.environ)
        if isinstance(value, invalid_hp) and env.get("DET_TRIAL_ID") and env.get("DET_MASTER"):
            try:
                _report(env)
                print("det.InvalidHP: the trial ends as invalid", file=sys.stderr)
            except Exception as e:  # the traceback below still tells the user what happened
                print(f"could not report det.InvalidHP to the master: {e}", file=sys.stderr)
        previous(kind, value, tb)

    sys.excepthook = hook
