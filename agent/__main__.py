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
from typing import NoReturn

from determined.common import private_dirs
from pydet.agent import config, slots
from pydet.agent.connection import AgentRefused
from pydet.agent.daemon import Daemon
from pydet.agent.outbox import Outbox

log = logging.getLogger("pydet.agent")

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def main(argv: Sequence[str] | None = None) -> None:
    try:
        cfg = config.load(argv)
    except config.ConfigError as e:
        _fail(str(e))
    try:
        # Tasks' code, contexts and checkpoints pass through it: its user's alone.
        tightened = private_dirs.make_private(cfg.work_dir)
    except private_dirs.SharedDirectory as e:
        _fail(f"--work-dir: {e}")
    except OSError as e:
        _fail(f"cannot create the work dir {cfg.work_dir}: {e.strerror or e}")
    logging.basicConfig(level=cfg.log_level, format=LOG_FORMAT, stream=sys.stderr)
    # h2 and hpack log every frame at DEBUG, which drowns the agent's own lines.
    for noisy in ("hpack", "h2"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    agent_slots = slots.detect(cfg.slots)
    try:
        asyncio.run(_serve(cfg, agent_slots, tightened))
    except BaseExceptionGroup as group:
        refused = group.subgroup(AgentRefused)
        if refused is None:
            raise
        # One line: the log goes to stderr too, so this is not logged as well.
        print(f"det-agent: {refused.exceptions[0]}", file=sys.stderr)
        sys.exit(1)
    sys.exit(0)


async def _daemon(cfg: config.AgentConfig, agent_slots: list[slots.SlotSpec]) -> Daemon:
    if cfg.runtime == "hollow":
        from pydet.agent.hollow_runtime import HollowRuntime

        hollow = HollowRuntime(
            master=cfg.master, agent_id=cfg.agent_id, master_cert_file=cfg.master_cert_file
        )
        return Daemon(cfg, slots=agent_slots, runtime=hollow)
    if cfg.runtime != "docker":
        return Daemon(cfg, slots=agent_slots)
    # Imported here: aiohttp costs an agent on the process runtime startup time for nothing.
    from pydet.agent.docker_engine import DockerUnavailable
    from pydet.agent.docker_runtime import DockerRuntime

    try:
        runtime = await DockerRuntime.connect(
            agent_id=cfg.agent_id,
            master=cfg.master,
            work_dir=cfg.work_dir,
            slots=agent_slots,
            default_image=cfg.default_image,
            harness=cfg.docker_harness,
            master_cert_file=cfg.master_cert_file,
        )
    except DockerUnavailable as e:
        _fail(e.message)
    # Containers left by an earlier run of this agent are adopted before the hello, which
    # lists them; their exits go to the master through the same outbox.
    outbox = Outbox(on_sent=runtime.lines_sent)
    try:
        await runtime.adopt(outbox.put)
    except DockerUnavailable as e:
        await runtime.close()
        _fail(e.message)
    except BaseException:
        await runtime.close()
        raise
    return Daemon(cfg, slots=agent_slots, runtime=runtime, outbox=outbox)


async def _serve(
    cfg: config.AgentConfig, agent_slots: list[slots.SlotSpec], tightened: list[str]
) -> None:
    daemon = await _daemon(cfg, agent_slots)
    if tightened:  # said once the agent will run: a refused start stays one line
        log.warning(
            "made the work directory's %s readable by its owner alone (they were open to "
            "other users)",
            ", ".join(tightened),
        )
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


def _fail(message: str) -> NoReturn:
    print(f"det-agent: {message}", file=sys.stderr)
    sys.exit(2)


if __name__ == "__main__":
    main()
