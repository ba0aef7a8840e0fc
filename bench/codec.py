"""How fast the master's protobuf codec is beside betterproto2's own and the official runtime.

In process: encode and decode one job-queue entry (``v1.Job``), decode a 100-job listing, and
encode a batch of 5,000 metric reports (the Core API's hot path, per report), with
betterproto2's generated methods, with the official ``google.protobuf`` runtime (upb, classes
built from api/proto by grpc_tools' protoc into a temporary directory), and with
``determined.common.wire`` (the codec every grpclib channel and the master use). Prints the
best per-call time of three rounds.

    python bench/codec.py
"""

from __future__ import annotations

import math
import pathlib
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "harness"))

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory  # noqa: E402

from determined.api.gen import v1  # noqa: E402
from determined.common import timestamps, wire  # noqa: E402
from determined.core._train import MetricRecord  # noqa: E402

PROTO_DIR = ROOT / "api" / "proto"


def official_classes() -> dict[str, Any]:
    """The official runtime's message classes for api/proto, by name (``Job``)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = pathlib.Path(tmp) / "v1.pb"
        protos = sorted(str(p.relative_to(PROTO_DIR)) for p in PROTO_DIR.glob("v1/*.proto"))
        subprocess.run(
            [
                sys.executable,
                "-m",
                "grpc_tools.protoc",
                f"-I{PROTO_DIR}",
                f"--descriptor_set_out={out}",
                "--include_imports",
                *protos,
            ],
            check=True,
        )
        files = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    pool = descriptor_pool.DescriptorPool()
    for f in files.file:
        pool.Add(f)
    return {
        desc.name: message_factory.GetMessageClass(desc)
        for f in files.file
        for desc in pool.FindFileByName(f.name).message_types_by_name.values()
    }


def per_call(fn: Callable[[], Any], n: int) -> float:
    best = math.inf
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - start) / n)
    return best


def main() -> int:
    pb = official_classes()
    job = v1.Job(
        job_id="a" * 36,
        type=v1.JobType.EXPERIMENT,
        name="job",
        priority=42,
        weight=1.0,
        submission_time=timestamps.to_datetime(1700000000.0),
        allocated_slots=1,
        requested_slots=1,
        summary=v1.JobSummary(state=v1.JobSummaryState.QUEUED),
        username="determined",
        resource_pool="default",
        entity_id="7",
    )
    data = wire.encode(job)
    pb_job = pb["Job"].FromString(data)
    listing = wire.encode(v1.GetJobsResponse(jobs=[job] * 100))
    n_reports = 5000
    records = [
        MetricRecord("training", step, '{"loss":0.5,"accuracy":0.25}', 1.7e9 + step, "")
        for step in range(1, n_reports + 1)
    ]

    def request_message() -> v1.ReportTrialMetricsRequest:
        # The generated class, as the master sees the request (tasks build it with
        # determined.api.lite; _rpc.metrics_request returns that lighter class).
        reports = [v1.MetricReport(**r._asdict()) for r in records]
        return v1.ReportTrialMetricsRequest(trial_id=1, run_id=1, reports=reports)

    reports = wire.encode(request_message())

    def official_request() -> bytes:
        # What a caller of the official runtime does: build the messages, then serialize.
        out = pb["ReportTrialMetricsRequest"](trial_id=1, run_id=1)
        add = out.reports.add
        for r in records:
            add(
                group=r.group,
                steps_completed=r.steps_completed,
                metrics=r.metrics,
                timestamp=r.timestamp,
                batch_metrics=r.batch_metrics,
            )
        data: bytes = out.SerializeToString()
        return data

    def ours_request() -> bytes:
        return wire.encode(request_message())

    rows = [
        (
            "Job encode",
            per_call(lambda: bytes(job), 200),
            per_call(pb_job.SerializeToString, 20000),
            per_call(lambda: wire.encode(job), 5000),
        ),
        (
            "Job decode",
            per_call(lambda: v1.Job.parse(data), 500),
            per_call(lambda: pb["Job"].FromString(data), 20000),
            per_call(lambda: wire.decode(v1.Job, data), 5000),
        ),
        (
            "100-job list decode",
            per_call(lambda: v1.GetJobsResponse.parse(listing), 10),
            per_call(lambda: pb["GetJobsResponse"].FromString(listing), 1000),
            per_call(lambda: wire.decode(v1.GetJobsResponse, listing), 100),
        ),
        (
            "metric report encode (of 5,000, built + encoded)",
            per_call(lambda: bytes(request_message()), 1) / n_reports,
            per_call(official_request, 5) / n_reports,
            per_call(ours_request, 5) / n_reports,
        ),
        (
            "metric report decode (of 5,000)",
            per_call(lambda: v1.ReportTrialMetricsRequest.parse(reports), 1) / n_reports,
            per_call(lambda: pb["ReportTrialMetricsRequest"].FromString(reports), 20) / n_reports,
            per_call(lambda: wire.decode(v1.ReportTrialMetricsRequest, reports), 5) / n_reports,
        ),
    ]
    print("| operation | betterproto2 | official (upb) | pydet wire codec | vs betterproto2 |")
    print("| --- | --- | --- | --- | --- |")
    for name, old, official, new in rows:
        print(
            f"| {name} | {old * 1e6:,.2f} us | {official * 1e6:,.2f} us | {new * 1e6:,.2f} us "
            f"| {old / new:.0f}x |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
