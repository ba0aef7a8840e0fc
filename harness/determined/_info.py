"""What a task knows about itself: ``det.get_cluster_info()``.

Every ``DET_*`` variable the master sets for a task is read here and only here.

The two classes are written out rather than made with ``dataclasses``: ``import determined``
runs in every task (twice per trial), and ``dataclasses`` (with ``inspect``) was a quarter of
its time.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from typing import Self


class _Frozen:
    """Equality, hash, repr and read-only attributes from ``__slots__``, as a frozen
    dataclass has them."""

    __slots__: tuple[str, ...] = ()

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, _Frozen)
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        args = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"{type(self).__name__}({args})"

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is read-only: cannot assign {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is read-only: cannot delete {name!r}")

    def _init(self, **values: Any) -> None:
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def __copy__(self) -> Self:
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), dict(zip(self.__slots__, self._values(), strict=True))))


def _rebuild(cls: type[_Frozen], values: dict[str, Any]) -> _Frozen:
    obj = object.__new__(cls)
    obj._init(**values)
    return obj


class TrialInfo(_Frozen):
    """The trial a task belongs to (``cluster_info.trial``)."""

    __slots__ = (  # noqa: RUF023  # in the order of the fields, as repr shows them
        "trial_id",
        "experiment_id",
        "trial_seed",
        "hparams",
        "config",
        "steps_completed",
        "trial_run_id",
    )
    trial_id: int
    experiment_id: int
    trial_seed: int
    hparams: dict[str, Any]
    config: dict[str, Any]
    steps_completed: int
    trial_run_id: int

    def __init__(
        self,
        trial_id: int,
        experiment_id: int,
        trial_seed: int,
        hparams: dict[str, Any],
        config: dict[str, Any],
        steps_completed: int,
        trial_run_id: int,
    ) -> None:
        self._init(
            trial_id=trial_id,
            experiment_id=experiment_id,
            trial_seed=trial_seed,
            hparams=hparams,
            config=config,
            steps_completed=steps_completed,
            trial_run_id=trial_run_id,
        )

    @property
    def _trial_run_id(self) -> int:
        return self.trial_run_id

    # Determined's private names, which its examples read (``info.trial._config["data"]``).
    @property
    def _config(self) -> dict[str, Any]:
        return self.config

    @property
    def _steps_completed(self) -> int:
        return self.steps_completed


class ClusterInfo(_Frozen):
    """Describes the running task; ``None`` from ``get_cluster_info()`` off-cluster."""

    __slots__ = (  # noqa: RUF023  # in the order of the fields, as repr shows them
        "master_url",
        "cluster_id",
        "agent_id",
        "slot_ids",
        "task_id",
        "allocation_id",
        "session_token",
        "task_type",
        "latest_checkpoint",
        "container_addrs",
        "container_rank",
        "container_slot_counts",
        "gpu_uuids",
        "trial",
        "master_cert_file",
        "resources_id",
    )
    master_url: str
    cluster_id: str
    agent_id: str
    slot_ids: list[int]
    task_id: str
    allocation_id: str
    session_token: str
    task_type: str
    latest_checkpoint: str | None
    container_addrs: list[str]
    container_rank: int
    container_slot_counts: list[int]
    gpu_uuids: list[str]
    trial: TrialInfo | None
    # The CA certificate (PEM) that verifies a TLS master; None when it serves no TLS, or
    # when the system's CAs verify it.
    master_cert_file: str | None
    # This container's id among the allocation's resources (``DET_RESOURCES_ID``).
    resources_id: str

    def __init__(
        self,
        master_url: str,
        cluster_id: str,
        agent_id: str,
        slot_ids: list[int],
        task_id: str,
        allocation_id: str,
        session_token: str,
        task_type: str,
        latest_checkpoint: str | None = None,
        container_addrs: list[str] | None = None,
        container_rank: int = 0,
        container_slot_counts: list[int] | None = None,
        gpu_uuids: list[str] | None = None,
        trial: TrialInfo | None = None,
        master_cert_file: str | None = None,
        resources_id: str = "",
    ) -> None:
        self._init(
            master_url=master_url,
            cluster_id=cluster_id,
            agent_id=agent_id,
            slot_ids=slot_ids,
            task_id=task_id,
            allocation_id=allocation_id,
            session_token=session_token,
            task_type=task_type,
            latest_checkpoint=latest_checkpoint,
            container_addrs=[] if container_addrs is None else container_addrs,
            container_rank=container_rank,
            container_slot_counts=[] if container_slot_counts is None else container_slot_counts,
            gpu_uuids=[] if gpu_uuids is None else gpu_uuids,
            trial=trial,
            master_cert_file=master_cert_file,
            resources_id=resources_id,
        )

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
        import json

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
            resources_id=env.get("DET_RESOURCES_ID", ""),
        )


def get_cluster_info() -> ClusterInfo | None:
    """The running task's cluster info, or ``None`` when not running on a cluster."""
    return ClusterInfo.from_env(os.environ)
