"""``det-agent``: run this node's agent until SIGTERM or SIGINT.

The first signal stops the agent in order (its containers are stopped and their exits
reported); a second one kills the containers and exits at once.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from collections.abc import Sequence

from agent import config, slots
from agent.daemon import Daemon

log = logging.getLogger("agent")

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def main(argv: Sequence[str] | None = None) -> None:
    try:
        cfg = config.load(argv)
    except config.ConfigError as e:
        _fail(str(e))
    if cfg.runtime == "docker":
        _fail("the docker runtime is not available yet; use --runtime process")
    try:
        cfg.work_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        _fail(f"cannot create the work dir {cfg.work_dir}: {e.strerror or e}")
    logging.basicConfig(level=cfg.log_level, format=LOG_FORMAT, stream=sys.stderr)
    agent_slots = slots.detect(cfg.slots)
    asyncio.run(_serve(Daemon(cfg, slots=agent_slots)))
    sys.exit(0)


async def _serve(daemon: Daemon) -> None:
    loop = asyncio.get_running_loop()
    seen = 0

    def on_signal(sig: signal.Signals) -> None:
        nonlocal seen
        seen += 1
        if seen == 1:
            log.info("%s: stopping the agent (send it again to exit at once)", sig.name)
            daemon.request_stop()
            return
        log.warning("%s again: killing all containers and exiting now", sig.name)
        daemon.kill_now()
        logging.shutdown()
        os._exit(128 + sig.value)

    handled = (signal.SIGTERM, signal.SIGINT)
    for sig in handled:
        loop.add_signal_handler(sig, on_signal, sig)
    try:
        await daemon.run()
    finally:
        for sig in handled:
            loop.remove_signal_handler(sig)


def _fail(message: str) -> None:
    print(f"det-agent: {message}", file=sys.stderr)
    sys.exit(2)


if __name__ == "__main__":
    main()
