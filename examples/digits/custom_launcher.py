"""A distributed launcher written by hand, in place of torchrun.

    python3 custom_launcher.py python3 3_checkpoints.py --epochs 4

It starts one worker per slot of its container, each under
``python3 -m determined.launch.wrap_rank RANK --`` so that every output line is stored with
the worker's rank (``det trial logs --rank-id N``), and gives each worker the variables
torch.distributed (``init_method="env://"``) and ``DistributedContext.from_torch_distributed()``
read. Its duty to Determined is the one every launcher has: when one worker fails, end the
others at once and exit non-zero, so a distributed job never hangs on a dead peer; exit 0
only when every worker did.
"""

import hashlib
import logging
import os
import signal
import subprocess
import sys
import time

import determined as det

# How long workers get to exit after SIGTERM before they are killed.
GRACE_SECONDS = 5.0


def rendezvous_port(info):
    """The port of the torch.distributed store on the chief container.

    Every container must agree on it before any of them can talk to another, so it is
    derived from the allocation id (new for every run of a trial); MASTER_PORT overrides it.
    """
    if os.environ.get("MASTER_PORT"):
        return int(os.environ["MASTER_PORT"])
    digest = hashlib.sha256(info.allocation_id.encode()).digest()
    return 20000 + int.from_bytes(digest[:2], "big") % 20000


def worker_env(info, rank, local_rank):
    slots_per_node = max(1, len(info.slot_ids))
    num_nodes = len(info.container_addrs)
    return {
        **os.environ,
        "RANK": str(rank),
        "WORLD_SIZE": str(slots_per_node * num_nodes),
        "LOCAL_RANK": str(local_rank),
        "LOCAL_WORLD_SIZE": str(slots_per_node),
        "GROUP_RANK": str(info.container_rank),
        "GROUP_WORLD_SIZE": str(num_nodes),
        "MASTER_ADDR": info.container_addrs[0],
        "MASTER_PORT": str(rendezvous_port(info)),
        "DET_CHIEF_IP": info.container_addrs[0],
    }


def stop(procs, sig):
    for proc in procs:
        if proc.poll() is None:
            # Each worker leads its own process group: the signal reaches all it started.
            os.killpg(proc.pid, sig)


def launch(info, script):
    slots_per_node = max(1, len(info.slot_ids))
    procs = []
    for local_rank in range(slots_per_node):
        rank = info.container_rank * slots_per_node + local_rank
        cmd = ["python3", "-m", "determined.launch.wrap_rank", str(rank), "--", *script]
        env = worker_env(info, rank, local_rank)
        procs.append(subprocess.Popen(cmd, env=env, start_new_session=True))
    logging.info(f"started {len(procs)} workers: {' '.join(script)}")

    # Pass a SIGTERM from the agent (a kill, or the end of a preemption grace period) on.
    signal.signal(signal.SIGTERM, lambda signum, frame: stop(procs, signal.SIGTERM))

    first_failure = 0
    kill_at = None
    while any(proc.poll() is None for proc in procs):
        for proc in procs:
            code = proc.poll()
            if code not in (None, 0) and first_failure == 0:
                first_failure = code if code > 0 else 128 - code
                logging.error(f"a worker exited with {first_failure}; stopping the other workers")
                stop(procs, signal.SIGTERM)
                kill_at = time.monotonic() + GRACE_SECONDS
        if kill_at is not None and time.monotonic() > kill_at:
            stop(procs, signal.SIGKILL)
            kill_at = None
        time.sleep(0.05)
    for proc in procs:
        code = proc.returncode
        if code != 0 and first_failure == 0:
            first_failure = code if code > 0 else 128 - code
    return first_failure


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
    if len(sys.argv) < 2:
        print(f"usage: python3 {sys.argv[0]} SCRIPT...", file=sys.stderr)
        sys.exit(2)
    info = det.get_cluster_info()
    assert info is not None, "this launcher only runs on-cluster"
    sys.exit(launch(info, sys.argv[1:]))
