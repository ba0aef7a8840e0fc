"""The job queue on a live master with 1,000 queued jobs.

Prints a table: latency of `GetJobs` and of `UpdateJobQueue` (--ahead-of) with 1,000 jobs
queued behind one running job, and the time from freeing the slot (killing the running
job) to the next job's first line of user code.

    python bench/queue_live.py [--jobs 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import pathlib
import statistics
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from determined.api.gen import v1
from determined.common import client, context
from tests.cluster import Cluster

BLOCKER = "entrypoint: python3 wait.py\nsearcher: {name: single, metric: x}\nmax_restarts: 0\n"
QUEUED = "entrypoint: python3 hello.py\nsearcher: {name: single, metric: x}\nmax_restarts: 0\n"


async def run(address: str, token: str, ctx: bytes, jobs: int) -> list[tuple[str, str, str]]:
    async with client.session(address, token=token) as s:
        stub = s.stub
        blocker = await s.call(
            stub.create_experiment(
                v1.CreateExperimentRequest(config=BLOCKER, context=ctx, activate=True)
            )
        )
        assert blocker.experiment is not None
        began = time.perf_counter()
        for _ in range(jobs):
            await s.call(
                stub.create_experiment(
                    v1.CreateExperimentRequest(config=QUEUED, context=ctx, activate=True)
                )
            )
        create_rate = jobs / (time.perf_counter() - began)

        listing, updates = [], []
        for _ in range(10):
            t = time.perf_counter()
            queue = (await s.call(stub.get_jobs(v1.GetJobsRequest()))).jobs
            listing.append(time.perf_counter() - t)
        assert len(queue) == jobs + 1, len(queue)
        for i in range(10):
            mover, anchor = queue[-1 - i].job_id, queue[1 + i].job_id
            t = time.perf_counter()
            update = v1.JobUpdate(job_id=mover, ahead_of=anchor)
            await s.call(stub.update_job_queue(v1.UpdateJobQueueRequest(updates=[update])))
            updates.append(time.perf_counter() - t)
        queue = (await s.call(stub.get_jobs(v1.GetJobsRequest()))).jobs
        next_exp = int(queue[1].entity_id)

        t = time.time()
        await s.call(
            stub.kill_experiment(v1.ExperimentActionRequest(experiment_id=blocker.experiment.id))
        )
        first_line = None
        while first_line is None:
            trials = await s.call(
                stub.get_experiment_trials(v1.GetExperimentTrialsRequest(experiment_id=next_exp))
            )
            async for batch in stub.trial_logs(v1.TrialLogsRequest(trial_id=trials.trials[0].id)):
                for line in batch.logs:
                    if "hello from user code" in line.message:
                        first_line = line.timestamp
            await asyncio.sleep(0.02)
        handoff = first_line - t

    ms = lambda xs: f"{statistics.median(xs) * 1000:.1f} ms"  # noqa: E731
    return [
        ("create experiment (queued)", f"{1000 / create_rate:.1f} ms each", ""),
        (f"job list with {jobs + 1} jobs (median)", ms(listing), "< 50 ms"),
        ("job update --ahead-of (median)", ms(updates), "< 50 ms"),
        ("slot freed -> next job's first user line", f"{handoff:.2f} s", ""),
    ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        (root / "ctx").mkdir()
        (root / "ctx" / "wait.py").write_text("import time\ntime.sleep(3600)\n")
        (root / "ctx" / "hello.py").write_text("print('hello from user code', flush=True)\n")
        ctx = context.pack_context(root / "ctx")
        cluster = Cluster(root)
        try:
            cluster.start_master()
            cluster.start_agent("agent-0", slots=1)
            rows = asyncio.run(run(cluster.address, cluster.token, ctx, args.jobs))
        finally:
            cluster.close()
    width = max(len(r[0]) for r in rows)
    print(f"{'measure'.ljust(width)} | {'value':>14} | target")
    print(f"{'-' * width}-+-{'-' * 14}-+-------")
    for name, value, target in rows:
        print(f"{name.ljust(width)} | {value:>14} | {target}")


if __name__ == "__main__":
    main()
