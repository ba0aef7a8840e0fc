"""The Slurm queue as the pool will see it: job states and pending reasons.

Two sources, both from Slurm 22.05: ``squeue -h -t all -o %i|%T|%r|%N`` (``SQUEUE_FORMAT``)
and ``squeue --json`` (openapi v0.0.38; in 22.05 it lists every job the controller
knows, ignoring ``-j`` and ``-t``). Ended jobs stay listed for ``MinJobAge`` seconds.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

SQUEUE_FORMAT = "%i|%T|%r|%N"
SQUEUE_ARGS = ("squeue", "-h", "-t", "all", "-o", SQUEUE_FORMAT)

# Slurm's job states, folded into what a pool reports about an allocation.
_PHASES = {
    "PENDING": "PENDING",
    "CONFIGURING": "PENDING",
    "REQUEUED": "PENDING",
    "REQUEUE_HOLD": "PENDING",
    "REQUEUE_FED": "PENDING",
    "RESV_DEL_HOLD": "PENDING",
    "SUSPENDED": "PENDING",
    "RUNNING": "RUNNING",
    "COMPLETING": "RUNNING",
    "STAGE_OUT": "RUNNING",
    "SIGNALING": "RUNNING",
    "RESIZING": "RUNNING",
    "COMPLETED": "COMPLETED",
    "CANCELLED": "CANCELED",
    "PREEMPTED": "CANCELED",
    "REVOKED": "CANCELED",
    "DEADLINE": "FAILED",
    "TIMEOUT": "FAILED",
    "FAILED": "FAILED",
    "BOOT_FAIL": "FAILED",
    "NODE_FAIL": "FAILED",
    "OUT_OF_MEMORY": "FAILED",
    "SPECIAL_EXIT": "FAILED",
}

# Pending reasons that no amount of waiting fixes: the request exceeds what the partition
# or its nodes can ever give (as Slurm 22.05 says it with EnforcePartLimits=NO). A pool
# should fail such a trial with the reason rather than leave it queued.
NEVER_RUNS = frozenset(
    {
        "PartitionConfig",
        "PartitionNodeLimit",
        "PartitionTimeLimit",
        "BadConstraints",
        "InvalidAccount",
        "InvalidQOS",
        "PartitionDown",
        "PartitionInactive",
    }
)


@dataclass(frozen=True)
class SlurmJob:
    job_id: int
    # Slurm's own state (PENDING, RUNNING, CANCELLED, ...).
    state: str
    # The pending reason, or why it ended; None when Slurm says "None".
    reason: str | None
    nodes: tuple[str, ...]

    @property
    def phase(self) -> str:
        """PENDING, RUNNING, COMPLETED, CANCELED or FAILED (unknown states: PENDING)."""
        return _PHASES.get(self.state, "PENDING")

    @property
    def never_runs(self) -> bool:
        return self.state == "PENDING" and self.reason in NEVER_RUNS


def _reason(text: str) -> str | None:
    text = text.strip()
    return None if text in ("", "None", "(null)") else text


def _nodes(text: str) -> tuple[str, ...]:
    # Hostlist expressions (node[1-3]) are left as Slurm wrote them: scontrol show
    # hostnames expands them where a pool needs the names.
    text = text.strip()
    return () if text in ("", "(null)") else (text,)


def parse_squeue(text: str) -> dict[int, SlurmJob]:
    """Parse the output of ``SQUEUE_ARGS``, by job id; array/het suffixes are skipped."""
    jobs: dict[int, SlurmJob] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = line.split("|")
        if len(parts) != 4:
            raise ValueError(f"unexpected squeue line {line!r} (wanted {SQUEUE_FORMAT})")
        job_id, state, reason, nodes = parts
        if not job_id.strip().isdigit():
            continue
        jobs[int(job_id)] = SlurmJob(int(job_id), state.strip(), _reason(reason), _nodes(nodes))
    return jobs


def parse_squeue_json(text: str) -> dict[int, SlurmJob]:
    """Parse ``squeue --json`` (22.05's openapi v0.0.38 shape), by job id."""
    data: Any = json.loads(text)
    errors = data.get("errors") or []
    if errors:
        raise ValueError(f"squeue --json reported errors: {errors}")
    jobs: dict[int, SlurmJob] = {}
    for job in data.get("jobs", []):
        state = job.get("job_state")
        # Newer Slurm writes a list of states ("job_state": ["PENDING"]).
        if isinstance(state, list):
            state = state[0] if state else ""
        job_id = int(job["job_id"])
        jobs[job_id] = SlurmJob(
            job_id,
            str(state or ""),
            _reason(str(job.get("state_reason") or "")),
            _nodes(str(job.get("nodes") or "")),
        )
    return jobs
