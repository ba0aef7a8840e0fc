"""One rank: times core_context.distributed.allgather (through the master) and
torch.distributed.all_gather_object (gloo) on the same small payload, interleaved in blocks.

    python3 allgather_worker.py ROUNDS OUT_DIR

Rank 0 writes OUT_DIR/allgather_<size>.json with every rank's per-call latencies and its
process CPU time per call of each method.
"""

import json
import os
import pathlib
import sys
import time
from datetime import timedelta
from typing import Any

import torch.distributed as dist

from determined import core

WARMUP = 20
BLOCK = 25


def main() -> None:
    rounds = int(sys.argv[1])
    out = pathlib.Path(sys.argv[2])
    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    distributed = core.DistributedContext(
        rank=rank,
        size=size,
        local_rank=int(os.environ["LOCAL_RANK"]),
        local_size=int(os.environ["LOCAL_WORLD_SIZE"]),
        cross_rank=0,
        cross_size=1,
        chief_ip="127.0.0.1",
    )
    with core.init(distributed=distributed) as core_context:
        dist.init_process_group(
            "gloo",
            init_method=f"tcp://{os.environ['GLOO_ADDR']}:{os.environ['GLOO_PORT']}",
            rank=rank,
            world_size=size,
            timeout=timedelta(seconds=120),
        )
        payload = {"rank": rank, "loss": 0.25, "name": "x" * 32}

        def via_core() -> list[Any]:
            return core_context.distributed.allgather(payload)

        def via_gloo() -> list[Any]:
            got: list[Any] = [None] * size
            dist.all_gather_object(got, payload)
            return got

        for fn in (via_core, via_gloo):
            for _ in range(WARMUP):
                assert [g["rank"] for g in fn()] == list(range(size))
        timings: dict[str, list[float]] = {"core": [], "gloo": []}
        # CPU time of this process (all its threads) per method.
        cpu = {"core": 0.0, "gloo": 0.0}
        for _ in range(max(1, rounds // BLOCK)):
            for name, fn in (("core", via_core), ("gloo", via_gloo)):
                cpu_began = time.process_time()
                for _ in range(BLOCK):
                    began = time.perf_counter()
                    fn()
                    timings[name].append(time.perf_counter() - began)
                cpu[name] += time.process_time() - cpu_began
        timings["cpu"] = [cpu["core"] / len(timings["core"]), cpu["gloo"] / len(timings["gloo"])]
        everyone = core_context.distributed.gather(timings)
        dist.destroy_process_group()
    if rank == 0:
        assert everyone is not None
        (out / f"allgather_{size}.json").write_text(
            json.dumps({"size": size, "block": BLOCK, "ranks": everyone})
        )


if __name__ == "__main__":
    main()
