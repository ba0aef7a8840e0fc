"""``python3 -m determined.launch.horovod [[HVD_OVERRIDES...] --] (--trial TRIAL | SCRIPT...)``.

On the chief container (rank 0) this runs
``horovodrun -np TOTAL -H addr1:slots1,addr2:slots2 [HVD_OVERRIDES] wrap_rank ... SCRIPT...``;
horovodrun starts every worker itself, on the other containers over ssh, so those need an
sshd that the chief can reach (the task image provides it: pydet starts none). The other
containers start nothing: they mark themselves daemons (``rpc.mark_resources_daemon``) and
wait, and the master stops them once the chief container has exited; the chief's exit alone
decides how the trial ends.

Workers run under ``wrap_rank HOROVOD_RANK,OMPI_COMM_WORLD_RANK,PMI_RANK`` and see
``DET_CHIEF_IP`` and ``USE_HOROVOD``. HVD_OVERRIDES replace pydet's value for the same flag
(``-np``/``--num-proc``, ``-H``/``--hosts``).
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import sys
from collections.abc import Sequence

import determined as det
from determined.common import errors
from determined.launch import _args, _rendezvous, rpc
from determined.launch._supervisor import Worker, supervise

PROG = "determined.launch.horovod"
RANK_VARIABLES = "HOROVOD_RANK,OMPI_COMM_WORLD_RANK,PMI_RANK"


def build_command(
    *,
    nodes: Sequence[tuple[str, int]],
    overrides: Sequence[str],
    worker: Sequence[str],
    python: str = "python3",
) -> list[str]:
    """The horovodrun command line for ``(address, slots)`` per container."""
    ours = [
        _args.Flag(("-np", "--num-proc"), str(sum(n for _, n in nodes))),
        _args.Flag(("-H", "--hosts"), ",".join(f"{addr}:{n}" for addr, n in nodes)),
    ]
    return [
        "horovodrun",
        *_args.merge_flags(ours, overrides),
        *_args.wrap_rank(RANK_VARIABLES, python),
        *worker,
    ]


def wait_for_termination() -> int:
    """Block until SIGTERM or SIGINT arrives; 0, since being ended is this container's job."""
    wanted = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, wanted)
    signal.sigwait(wanted)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
    log = logging.getLogger(__name__)
    parsed = _args.parse_cli(
        sys.argv[1:] if argv is None else argv, prog=PROG, overrides_name="HVD_OVERRIDES"
    )
    if isinstance(parsed, int):
        return parsed
    info = det.get_cluster_info()
    if info is None:
        print(f"{PROG} runs inside a pydet task (DET_ALLOCATION_ID is not set)", file=sys.stderr)
        return 2
    if info.container_rank > 0:
        try:
            rpc.mark_resources_daemon(info)
        except errors.DetError as e:
            print(f"{PROG}: {e.message}", file=sys.stderr, flush=True)
            return 1
        log.info("horovodrun on the chief container starts this container's workers; waiting")
        return wait_for_termination()
    if shutil.which("horovodrun") is None:
        print("horovodrun is not installed: pip install horovod", file=sys.stderr, flush=True)
        return 1
    python = sys.executable or "python3"
    cmd = build_command(
        nodes=_rendezvous.nodes(info),
        overrides=parsed.overrides,
        worker=parsed.worker(python),
        python=python,
    )
    chief = _rendezvous.chief_addr(info)
    env = {**os.environ, "DET_CHIEF_IP": chief, "USE_HOROVOD": "1"}
    log.info("running %s", cmd)
    return supervise([Worker(cmd, env=env)])


if __name__ == "__main__":
    sys.exit(main())
