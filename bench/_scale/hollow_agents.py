"""Many hollow agents in one process: ``--agents`` daemons of ``--slots`` slots each, on one
event loop, each the real agent daemon (its own stream to the master) on the hollow runtime.
Runs until SIGTERM or SIGINT.

    python3 bench/_scale/hollow_agents.py --master HOST:PORT --token-file F --agents 10 \\
        --slots 100 [--prefix hollow] [--work-s 0]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import pathlib
import signal
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from pydet.agent import config, slots  # noqa: E402
from pydet.agent.daemon import Daemon  # noqa: E402
from pydet.agent.hollow_runtime import HollowRuntime  # noqa: E402


async def serve(args: argparse.Namespace) -> None:
    daemons = []
    work_root = pathlib.Path(tempfile.mkdtemp(prefix="pydet-hollow-"))
    for i in range(args.agents):
        agent_id = f"{args.prefix}-{i}"
        cfg = config.load(
            [
                "--master",
                args.master,
                "--agent-id",
                agent_id,
                "--slots",
                str(args.slots),
                "--runtime",
                "hollow",
                "--token-file",
                args.token_file,
                "--work-dir",
                str(work_root / agent_id),
                "--log-level",
                "WARNING",
            ]
        )
        runtime = HollowRuntime(master=cfg.master, agent_id=agent_id, work_seconds=args.work_s)
        daemons.append(Daemon(cfg, slots=slots.detect(cfg.slots), runtime=runtime))
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, lambda: [d.request_stop() for d in daemons])
    async with asyncio.TaskGroup() as tg:
        for d in daemons:
            tg.create_task(d.run())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--master", required=True)
    parser.add_argument("--token-file", required=True)
    parser.add_argument("--agents", type=int, default=10)
    parser.add_argument("--slots", type=int, default=100, help="slots per agent")
    parser.add_argument("--prefix", default="hollow")
    parser.add_argument("--work-s", type=float, default=0.0, help="each operation's sleep")
    args = parser.parse_args()
    logging.basicConfig(
        level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    asyncio.run(serve(args))


if __name__ == "__main__":
    main()
