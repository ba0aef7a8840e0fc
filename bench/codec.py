"""How fast the master's protobuf codec is beside betterproto2's own.

In process: encode and decode one job-queue entry (``v1.Job``) and decode a 100-job listing,
with betterproto2's generated methods and with ``determined.common.wire`` (the codec every
grpclib channel and the master use). Prints the best per-call time of three rounds.

    python bench/codec.py
"""

from __future__ import annotations

import math
import pathlib
import sys
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "harness"))

from determined.api.gen import v1
from determined.common import wire


def per_call(fn: Callable[[], Any], n: int) -> float:
    best = math.inf
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - start) / n)
    return best


def main() -> int:
    job = v1.Job(
        job_id="a" * 36,
        type="EXPERIMENT",
        name="job",
        priority=42,
        weight=1.0,
        submission_time=1700000000.0,
        acquired_slots=1,
        needed_slots=1,
        state="QUEUED",
        username="determined",
        resource_pool="default",
        entity_id=7,
    )
    data = bytes(job)
    listing = bytes(v1.GetJobsResponse(jobs=[job] * 100))
    rows = [
        (
            "Job encode",
            per_call(lambda: bytes(job), 200),
            per_call(lambda: wire.encode(job), 5000),
        ),
        (
            "Job decode",
            per_call(lambda: v1.Job.parse(data), 500),
            per_call(lambda: wire.decode(v1.Job, data), 5000),
        ),
        (
            "100-job list decode",
            per_call(lambda: v1.GetJobsResponse.parse(listing), 10),
            per_call(lambda: wire.decode(v1.GetJobsResponse, listing), 100),
        ),
    ]
    print("| operation | betterproto2 | pydet wire codec | speed-up |")
    print("| --- | --- | --- | --- |")
    for name, old, new in rows:
        print(f"| {name} | {old * 1e6:,.1f} us | {new * 1e6:,.2f} us | {old / new:.0f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
