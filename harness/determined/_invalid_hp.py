"""An uncaught ``det.InvalidHP`` ends the trial as invalid instead of failed.

User scripts raise it anywhere (Determined's contract), so it is caught where every script
ends: the interpreter's excepthook. The hook tells the master about the early exit, then
lets the default hook print the traceback; the process still exits non-zero, and the
master, knowing the reason, does not restart the trial.
"""

from __future__ import annotations

import sys
from types import TracebackType


def _report(info_env: dict[str, str]) -> None:
    # Imported here: `import determined` must stay fast for every task.
    import asyncio

    from determined.api import lite as v1
    from determined.common import client

    async def send() -> None:
        async with client.session(
            info_env["DET_MASTER"], token=info_env.get("DET_SESSION_TOKEN"), lite=True
        ) as s:
            req = v1.ReportTrialEarlyExitRequest(
                trial_id=int(info_env["DET_TRIAL_ID"]), reason="invalid_hp"
            )
            await s.call(s.stub.report_trial_early_exit(req))  # type: ignore[arg-type]  # lite

    asyncio.run(asyncio.wait_for(send(), timeout=30))


def install(invalid_hp: type[BaseException], env: dict[str, str]) -> None:
    if not env.get("DET_TRIAL_ID") or not env.get("DET_MASTER"):
        return
    previous = sys.excepthook

    def hook(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
        if isinstance(value, invalid_hp):
            try:
                _report(env)
                print("det.InvalidHP: the trial ends as invalid", file=sys.stderr)
            except Exception as e:  # the traceback below still tells the user what happened
                print(f"could not report det.InvalidHP to the master: {e}", file=sys.stderr)
        previous(kind, value, tb)

    sys.excepthook = hook
