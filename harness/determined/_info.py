"""What a task knows about itself: ``det.get_cluster_info()``.

Every ``DET_*`` variable the master sets for a task is read here and only here.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class TrialInfo:
    """The trial a task belongs to (``cluster_info.trial``)."""

    trial_id: int
    experiment_id: int
    trial_seed: int
    hparams: dict[str, Any]
    config: dict[str, Any]
    steps_completed: int
    trial_run_id: int

    @property
    def _trial_run_id(self) -> int:
        return self.trial_run_id


@dataclass(frozen=True)
class ClusterInfo:
    """Describes the running task; ``None`` from ``get_cluster_info()`` off-cluster."""

    master_url: str
    cluster_id: str
    agent_id: str
    slot_ids: list[int]
    task_id: str
    allocation_id: str
    session_token: str
    task_type: str
    latest_checkpoint: str | None = None
    container_addrs: list[str] = field(default_factory=list)
    container_rank: int = 0
    container_slot_counts: list[int] = field(default_factory=list)
    gpu_uuids: list[str] = field(default_factory=list)
    trial: TrialInfo | None = None
    # The CA certificate (PEM) that verifies a TLS master; None when it serves no TLS, or
    # when the system's CAs verify it.
    master_cert_file: str | None = None

    @property
    def user_data(self) -> dict[str, Any]:
        """The experiment config's ``data`` section."""
        if self.trial is None:
            return {}
        data = self.trial.config.get("data") or {}
        return dict(data)

    @property
    def master_address(self) -> str:
        return self.master_url

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> ClusterInfo | None:
        if "DET_ALLOCATION_ID" not in env:
            return None

        def as_json(key: str, default: Any) -> Any:
            raw = env.get(key)
            return json.loads(raw) if raw else default

        trial = None
        if env.get("DET_TRIAL_ID"):
            trial = TrialInfo(
                trial_id=int(env["DET_TRIAL_ID"]),
                experiment_id=int(env.get("DET_EXPERIMENT_ID", "0")),
                trial_seed=int(env.get("DET_TRIAL_SEED", "0")),
                hparams=as_json("DET_HPARAMS", {}),
                config=as_json("DET_EXPERIMENT_CONFIG", {}),
                steps_completed=int(env.get("DET_STEPS_COMPLETED", "0")),
                trial_run_id=int(env.get("DET_TRIAL_RUN_ID", "0")),
            )
        slot_ids = [int(s) for s in as_json("DET_SLOT_IDS", [])]
        addrs = [str(a) for a in as_json("DET_CONTAINER_ADDRS", [])] or ["127.0.0.1"]
        return cls(
            master_url=env.get("DET_MASTER", ""),
            cluster_id=env.get("DET_CLUSTER_ID", ""),
            agent_id=env.get("DET_AGENT_ID", ""),
            slot_ids=slot_ids,
            task_id=env.get("DET_TASK_ID", ""),
            allocation_id=env["DET_ALLOCATION_ID"],
            session_token=env.get("DET_SESSION_TOKEN", ""),
            task_type=env.get("DET_TASK_TYPE", "TRIAL"),
            latest_checkpoint=env.get("DET_LATEST_CHECKPOINT") or None,
            container_addrs=addrs,
            container_rank=int(env.get("DET_CONTAINER_RANK", "0")),
            container_slot_counts=[int(c) for c in as_json("DET_CONTAINER_SLOT_COUNTS", [])]
            or [len(slot_ids)],
            gpu_uuids=[str(u) for u in as_json("DET_GPU_UUIDS", [])],
            trial=trial,
            master_cert_file=env.get("DET_MASTER_CERT_FILE") or None,
        )


def get_cluster_info() -> ClusterInfo | None:
    """The running task's cluster info, or ``None`` when not running on a cluster."""
    return ClusterInfo.from_env(os.environ)
