"""Run torchrun across the task's containers.

Usage::

    python3 -m determined.launch.torch_distributed \\
        [[TORCH_OVERRIDES...] --] (--trial TRIAL | SCRIPT...)

Runs ``torch.distributed.run`` (torchrun) in every container of the task with one node per
container, one process per slot (one for a CPU-only task), this container's rank as the node
rank, and the chief container's address and a free port on it as the rendezvous endpoint.
Each worker runs under ``wrap_rank RANK``, so its output is tagged with its global rank.
TORCH_OVERRIDES are passed to torchrun and replace pydet's value for the same flag, whether
written ``--flag value`` or ``--flag=value``, with dashes or underscores.

Workers see ``DET_CHIEF_IP`` (the chief container's address) and ``USE_TORCH_DISTRIBUTED``,
and, across containers, ``GLOO_SOCKET_IFNAME`` / ``NCCL_SOCKET_IFNAME`` naming the interface
that holds this container's address (unless already set).
When a worker fails, torchrun ends its local siblings and exits non-zero, and so does this
launcher; ending the other containers is the master's part.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence

import determined as det
from determined.common import errors
from determined.launch import _args, _rendezvous
from determined.launch._supervisor import Worker, supervise

PROG = "determined.launch.torch_distributed"
_PORT_FLAGS = ("--master_port", "--master-port")


def build_command(
    *,
    nnodes: int,
    nproc_per_node: int,
    node_rank: int,
    master_addr: str,
    master_port: int | None,
    overrides: Sequence[str],
    worker: Sequence[str],
    python: str = "python3",
) -> list[str]:
    """The torchrun command line; ``master_port`` may be ``None`` only when overridden."""
    ours = [
        _args.Flag(("--nnodes",), str(nnodes)),
        _args.Flag(("--nproc_per_node", "--nproc-per-node"), str(nproc_per_node)),
        _args.Flag(("--node_rank", "--node-rank"), str(node_rank)),
        _args.Flag(("--master_addr", "--master-addr"), master_addr),
    ]
    if master_port is not None:
        ours.append(_args.Flag(_PORT_FLAGS, str(master_port)))
    return [
        python,
        "-m",
        "torch.distributed.run",
        *_args.merge_flags(ours, overrides),
        "--no-python",
        "--",
        *_args.wrap_rank("RANK", python),
        *worker,
    ]


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
    parsed = _args.parse_cli(
        sys.argv[1:] if argv is None else argv, prog=PROG, overrides_name="TORCH_OVERRIDES"
    )
    if isinstance(parsed, int):
        return parsed
    info = det.get_cluster_info()
    if info is None:
        print(f"{PROG} runs inside a pydet task (DET_ALLOCATION_ID is not set)", file=sys.stderr)
        return 2
    python = sys.executable or "python3"
    chief = _rendezvous.chief_addr(info)
    try:
        port = None if _args.given(parsed.overrides, *_PORT_FLAGS) else _rendezvous.chief_port(info)
    except errors.DetError as e:
        print(
            f"{PROG}: cannot agree on a port with the other containers: {e.message}",
            file=sys.stderr,
            flush=True,
        )
        return 1
    cmd = build_command(
        nnodes=len(info.container_addrs),
        nproc_per_node=max(1, len(info.slot_ids)),
        node_rank=info.container_rank,
        master_addr=chief,
        master_port=port,
        overrides=parsed.overrides,
        worker=parsed.worker(python),
        python=python,
    )
    env = {
        **os.environ,
        **_rendezvous.interface_env(info, dict(os.environ)),
        "DET_CHIEF_IP": chief,
        "USE_TORCH_DISTRIBUTED": "True",
    }
    logging.getLogger(__name__).info("running %s", cmd)
    return supervise([Worker(cmd, env=env)])


if __name__ == "__main__":
    sys.exit(main())
