"""`det-master`: run the master until SIGTERM or SIGINT (a second signal exits at once, and so
does a stop still running STOP_DEADLINE_SECONDS after the first)."""

from __future__ import annotations

import asyncio
import faulthandler
import gc
import io
import json
import logging
import os
import signal
import sys

from determined.common import errors
from pydet.master import config

# A benchmark's hook (bench/scale.py --profile): profile the master's event loop thread with
# cProfile (in its CPU time) and write the stats to this path when it stops (on SIGTERM, not
# on SIGKILL).
PROFILE_ENV = "PYDET_MASTER_PROFILE"

# A master still stopping this many seconds after the signal logs what it is waiting on; one
# still running STOP_DEADLINE_SECONDS after it prints its threads' stacks and exits with
# status 1. Every change of state is its own transaction, so this loses no more than a SIGKILL
# would: nothing.
SLOW_STOP_SECONDS = 10.0
STOP_DEADLINE_SECONDS = 25.0

log = logging.getLogger("pydet.master")


def _log_pending_tasks() -> None:
    """Log the stack of every task still running: what a slow stop is waiting on."""
    pending = [t for t in asyncio.all_tasks() if not t.done()]
    log.warning("still stopping after %g s; %d tasks running", SLOW_STOP_SECONDS, len(pending))
    for task in pending:
        out = io.StringIO()
        task.print_stack(file=out)
        log.warning("%s", out.getvalue().rstrip())


async def _main(cfg: config.MasterConfig) -> None:
    from pydet.master.server import Master

    master = Master(cfg)
    loop = asyncio.get_running_loop()
    signals = 0

    def on_signal() -> None:
        nonlocal signals
        signals += 1
        if signals > 1:
            os._exit(1)
        master.stop()
        loop.call_later(SLOW_STOP_SECONDS, _log_pending_tasks)
        # A thread of faulthandler's own: it fires even if the event loop or the interpreter's
        # exit is what hangs.
        faulthandler.dump_traceback_later(STOP_DEADLINE_SECONDS, exit=True)

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal)
    await master.run()


def main(argv: list[str] | None = None) -> None:
    # Whatever the master writes (the store and its WAL, tokens, logs it is given) is its
    # user's alone, whatever umask it was started with.
    os.umask(0o077)
    args = config.parser().parse_args(argv)
    try:
        cfg = config.load(args)
    except errors.DetError as e:
        print(f"det-master: {e.message}", file=sys.stderr)
        sys.exit(2)
    if args.check_config:
        print(json.dumps(config.deploy_facts(cfg)))
        return
    # The whole master, imported before gc.freeze() below; --check-config does without it.
    import pydet.master.server  # noqa: F401

    logging.basicConfig(
        level=cfg.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # These log every frame or statement at DEBUG, which drowns the master's own lines.
    for noisy in ("hpack", "h2", "aiosqlite", "botocore", "boto3", "urllib3", "s3transfer"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    # What the imports built (modules, classes, schemas) lives as long as the process: frozen,
    # the collector's full passes skip it (about a third less time in them under load).
    gc.freeze()
    try:
        _run_profiled(cfg, os.environ.get(PROFILE_ENV, ""))
    except errors.DetError as e:
        print(f"det-master: {e.message}", file=sys.stderr)
        sys.exit(1)


def _run_profiled(cfg: config.MasterConfig, profile_to: str) -> None:
    """Run the master; with a path, under cProfile, its stats written there at the end."""
    if not profile_to:
        asyncio.run(_main(cfg))
        return
    import cProfile
    import time

    # The thread's CPU time, not wall time: on a loaded machine the wall clock charges idle
    # waits in epoll and waits for the GIL to whatever function was running.
    profiler = cProfile.Profile(time.thread_time)
    try:
        profiler.runcall(asyncio.run, _main(cfg))
    finally:
        profiler.dump_stats(profile_to)


if __name__ == "__main__":
    main()
