"""``python3 -m determined.launch.tensorflow [--port PORT] [--] SCRIPT...``: TensorFlow's launcher.

Runs SCRIPT once per container. When the trial spans several containers it sets
``TF_CONFIG`` for a ``MultiWorkerMirroredStrategy``: every container is a worker at
``address:port`` (the first container the chief), this one at its own index, and the
script's lines are tagged with that rank (``wrap_rank``). With one container there is no
``TF_CONFIG``: ``DistributedContext.from_tf_config()`` then picks a ``MirroredStrategy`` for
several GPUs, or TensorFlow's default strategy. Every worker sees ``DET_CHIEF_IP``.

The port defaults to ``C10D_PORT`` (29400), as Determined's; containers that share an
address (agents on one machine) get consecutive ports.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Sequence

import determined as det
from determined.launch import _args
from determined.launch._supervisor import Worker, supervise

PROG = "determined.launch.tensorflow"


def tf_config(addrs: Sequence[str], rank: int, port: int) -> dict[str, object]:
    """The ``TF_CONFIG`` of container ``rank`` among containers at ``addrs``."""
    shared = len(set(addrs)) < len(addrs)
    workers = [f"{addr}:{port + i if shared else port}" for i, addr in enumerate(addrs)]
    return {"cluster": {"worker": workers}, "task": {"type": "worker", "index": rank}}


def parse(argv: Sequence[str]) -> tuple[int, list[str]]:
    """``(port, script)``; exits 2 with the usage on a bad command line."""
    parser = argparse.ArgumentParser(
        prog=f"python3 -m {PROG}",
        usage="%(prog)s [--port PORT] [--] SCRIPT...",
        description="Launch a script for TensorFlow training on a pydet cluster.",
    )
    parser.add_argument(
        "--port",
        type=int,
        default=int(os.environ.get("C10D_PORT") or 29400),
        help="the port TensorFlow's workers talk on (default: C10D_PORT or 29400)",
    )
    parser.add_argument("script", metavar="SCRIPT...", nargs=argparse.REMAINDER)
    args = list(argv)
    extra: list[str] = []
    if "--" in args:
        split = args.index("--")
        args, extra = args[:split], args[split + 1 :]
    parsed = parser.parse_args(args)
    script = list(parsed.script) + extra
    if not script:
        parser.print_usage(sys.stderr)
        print("error: empty script is not allowed", file=sys.stderr)
        sys.exit(2)
    return int(parsed.port), script


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
    port, script = parse(sys.argv[1:] if argv is None else argv)
    info = det.get_cluster_info()
    if info is None:
        print(f"{PROG} runs inside a pydet task (DET_ALLOCATION_ID is not set)", file=sys.stderr)
        return 2
    addrs = list(info.container_addrs) or ["127.0.0.1"]
    env = {**os.environ, "DET_CHIEF_IP": addrs[0]}
    cmd = list(script)
    if len(addrs) > 1:
        env["TF_CONFIG"] = json.dumps(tf_config(addrs, info.container_rank, port))
        cmd = [*_args.wrap_rank(str(info.container_rank), sys.executable or "python3"), *cmd]
    logging.getLogger(PROG).info("running %s", cmd)
    return supervise([Worker(cmd, env=env)])


if __name__ == "__main__":
    sys.exit(main())
