"""`det-master`: run the master until SIGTERM or SIGINT (a second signal exits at once)."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys

from determined.common import errors
from pydet.master import config
from pydet.master.server import Master

# A benchmark's hook (bench/scale.py --profile): profile the master's event loop thread with
# cProfile (in its CPU time) and write the stats to this path when it stops (on SIGTERM, not
# on SIGKILL).
PROFILE_ENV = "PYDET_MASTER_PROFILE"


async def _main(cfg: config.MasterConfig) -> None:
    master = Master(cfg)
    loop = asyncio.get_running_loop()
    signals = 0

    def on_signal() -> None:
        nonlocal signals
        signals += 1
        if signals > 1:
            os._exit(1)
        master.stop()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal)
    await master.run()


def main(argv: list[str] | None = None) -> None:
    args = config.parser().parse_args(argv)
    try:
        cfg = config.load(args)
    except errors.DetError as e:
        print(f"det-master: {e.message}", file=sys.stderr)
        sys.exit(2)
    logging.basicConfig(
        level=cfg.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # These log every frame or statement at DEBUG, which drowns the master's own lines.
    for noisy in ("hpack", "h2", "aiosqlite"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
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
