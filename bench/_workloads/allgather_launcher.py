"""A hand-written launcher: one worker process per slot, each under wrap_rank.

    python3 allgather_launcher.py ROUNDS OUT_DIR

The pattern of Determined's custom-launcher example: the launcher reads the slots from the
cluster info, starts `wrap_rank RANK -- python3 allgather_worker.py ...` per slot with the
rank layout in the environment (and a gloo rendezvous port), and exits non-zero, ending the
rest, as soon as one worker fails.
"""

import os
import socket
import subprocess
import sys
import time

import determined as det


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> int:
    info = det.get_cluster_info()
    assert info is not None, "run me on the cluster"
    size = len(info.slot_ids)
    port = free_port()
    here = os.path.dirname(os.path.abspath(__file__))
    procs = []
    for rank in range(size):
        env = {
            **os.environ,
            "RANK": str(rank),
            "WORLD_SIZE": str(size),
            "LOCAL_RANK": str(rank),
            "LOCAL_WORLD_SIZE": str(size),
            "GLOO_ADDR": "127.0.0.1",
            "GLOO_PORT": str(port),
        }
        cmd = [
            sys.executable,
            "-m",
            "determined.launch.wrap_rank",
            str(rank),
            "--",
            sys.executable,
            os.path.join(here, "allgather_worker.py"),
            *sys.argv[1:],
        ]
        procs.append(subprocess.Popen(cmd, env=env))
    failed = 0
    while procs and not failed:
        for p in list(procs):
            code = p.poll()
            if code is None:
                continue
            procs.remove(p)
            if code != 0:
                failed = code
        time.sleep(0.05)
    for p in procs:
        p.terminate()
    for p in procs:
        p.wait()
    return failed


if __name__ == "__main__":
    sys.exit(main())
