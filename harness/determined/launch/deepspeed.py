"""``python3 -m determined.launch.deepspeed [[DEEPSPEED_ARGS...] --] (--trial TRIAL | SCRIPT...)``.

Runs the DeepSpeed runner (``python3 -m deepspeed.launcher.runner``) in every container of
the task. A hostfile (``<addr> slots=<n>`` per container) describes the whole job; each
container starts only its own share with ``--no_ssh --node_rank R``, so no sshd or pdsh is
needed between containers. The master address is the chief container's, the port a free
one chosen by the chief. Workers run under ``wrap_rank RANK`` and see ``DET_CHIEF_IP``,
``USE_DEEPSPEED`` and ``DET_DEEPSPEED_HOSTFILE_PATH``. DEEPSPEED_ARGS go to the runner and
replace pydet's value for the same flag.

DeepSpeed's local launcher sets ``CUDA_VISIBLE_DEVICES`` for its workers from the hostfile's
slot numbers. When this container was given specific GPUs by number (the process runtime),
``--include`` names them so that each worker keeps its own GPU.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
import tempfile
from collections.abc import Mapping, Sequence

import determined as det
from determined.common import errors
from determined.launch import _args, _rendezvous
from determined.launch._supervisor import Worker, supervise

PROG = "determined.launch.deepspeed"
_PORT_FLAGS = ("--master_port",)
_FILTER_FLAGS = ("-i", "--include", "-e", "--exclude")


def host_names(addrs: Sequence[str]) -> list[str]:
    """Hostfile names: the addresses, or ``node-R`` labels when two containers share one.

    With ``--no_ssh`` DeepSpeed uses the names only as keys, and refuses duplicates.
    """
    if len(set(addrs)) == len(addrs):
        return list(addrs)
    return [f"node-{r}" for r in range(len(addrs))]


def visible_gpus(env: Mapping[str, str]) -> list[int] | None:
    """This container's GPU numbers from ``CUDA_VISIBLE_DEVICES``, when they are numbers."""
    raw = env.get("CUDA_VISIBLE_DEVICES", "").strip()
    parts = [p.strip() for p in raw.split(",") if p.strip()]
    if not parts or not all(p.isdigit() for p in parts):
        return None
    return [int(p) for p in parts]


def plan(
    nodes: Sequence[tuple[str, int]], node_rank: int, gpus: Sequence[int] | None
) -> tuple[list[str], str | None]:
    """The hostfile's lines and the ``--include`` filter (``None``: every slot of every host).

    ``gpus`` are this container's GPU numbers; they need a filter unless they are simply
    ``0..n-1``.
    """
    names = host_names([addr for addr, _ in nodes])
    counts = [n for _, n in nodes]
    include = None
    if gpus and len(gpus) == counts[node_rank] and list(gpus) != list(range(len(gpus))):
        counts[node_rank] = max(gpus) + 1
        include = "@".join(
            f"{name}:{','.join(map(str, gpus))}" if r == node_rank else name
            for r, name in enumerate(names)
        )
    lines = [f"{name} slots={n}" for name, n in zip(names, counts, strict=True)]
    return lines, include


def build_command(
    *,
    hostfile: str,
    master_addr: str,
    master_port: int | None,
    node_rank: int,
    slots: Sequence[int],
    include: str | None,
    overrides: Sequence[str],
    worker: Sequence[str],
    python: str = "python3",
) -> list[str]:
    """The DeepSpeed runner's command line; ``slots`` holds each container's slot count."""
    ours = [
        _args.Flag(("--hostfile", "-H"), hostfile),
        _args.Flag(("--master_addr",), master_addr),
        _args.Flag(("--node_rank",), str(node_rank)),
        _args.Flag(("--no_ssh",)),
        _args.Flag(("--no_python",)),
        _args.Flag(("--no_local_rank",)),
    ]
    if master_port is not None:
        ours.append(_args.Flag(_PORT_FLAGS, str(master_port)))
    # The runner refuses --num_nodes/--num_gpus together with --include/--exclude.
    if include is not None:
        if not _args.given(overrides, *_FILTER_FLAGS):
            ours.append(_args.Flag(("--include", "-i"), include))
    elif not _args.given(overrides, *_FILTER_FLAGS):
        ours.append(_args.Flag(("--num_nodes",), str(len(slots))))
        if len(set(slots)) == 1:
            ours.append(_args.Flag(("--num_gpus", "--num_accelerators"), str(slots[0])))
    return [
        python,
        "-m",
        "deepspeed.launcher.runner",
        *_args.merge_flags(ours, overrides),
        "--",
        *_args.wrap_rank("RANK", python),
        *worker,
    ]


def installed() -> bool:
    return importlib.util.find_spec("deepspeed") is not None


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
    parsed = _args.parse_cli(
        sys.argv[1:] if argv is None else argv, prog=PROG, overrides_name="DEEPSPEED_ARGS"
    )
    if isinstance(parsed, int):
        return parsed
    info = det.get_cluster_info()
    if info is None:
        print(f"{PROG} runs inside a pydet task (DET_ALLOCATION_ID is not set)", file=sys.stderr)
        return 2
    if not installed():
        print("deepspeed is not installed: pip install deepspeed", file=sys.stderr, flush=True)
        return 1
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
    nodes = _rendezvous.nodes(info)
    lines, include = plan(nodes, info.container_rank, visible_gpus(os.environ))
    with tempfile.TemporaryDirectory(prefix="det-deepspeed-") as tmp:
        hostfile = os.path.join(tmp, "hostfile")
        with open(hostfile, "w") as f:
            f.write("".join(line + "\n" for line in lines))
        cmd = build_command(
            hostfile=hostfile,
            master_addr=chief,
            master_port=port,
            node_rank=info.container_rank,
            slots=[n for _, n in nodes],
            include=include,
            overrides=parsed.overrides,
            worker=parsed.worker(python),
            python=python,
        )
        env = {
            **os.environ,
            **_rendezvous.interface_env(info, dict(os.environ)),
            "DET_CHIEF_IP": chief,
            "USE_DEEPSPEED": "1",
            "DET_DEEPSPEED_HOSTFILE_PATH": hostfile,
        }
        # DeepSpeed's launcher says LOCAL_SIZE; torchrun's LOCAL_WORLD_SIZE, which accelerate
        # reads (and sets to 1 when missing: a Trainer with DeepSpeed on CPUs then hangs in
        # its first all-reduce).
        env.setdefault("LOCAL_WORLD_SIZE", str(nodes[info.container_rank][1]))
        logging.getLogger(__name__).info("running %s", cmd)
        return supervise([Worker(cmd, env=env)])


if __name__ == "__main__":
    sys.exit(main())
