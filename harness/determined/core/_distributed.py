"""``core_context.distributed``: who this worker is, and small collectives between workers.

The collectives (``allgather``, ``gather``, ``broadcast`` and their ``_local`` forms) carry
any picklable object. They are meant for coordination (a checkpoint id, a preemption
decision), not for tensors: use your framework's collectives for those. With more than one
worker they pass through the master (RPC ``AllocationAllGather``), which also ends a
collective as soon as any container of the task exits, so a dead peer raises an error here
instead of hanging the rest.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import determined as det
from determined.common import errors

log = logging.getLogger("determined.core")

# A collective waits this long for its slowest peer (a peer may be busy validating or
# saving a checkpoint); the master aborts it sooner when a peer's container exits.
DEFAULT_COLLECTIVE_TIMEOUT = 3600.0

WORLD_GROUP = "world"


class CollectiveError(errors.DetError, RuntimeError):
    """A collective that cannot complete: a peer died, the task ended, or it timed out."""

    def __init__(self, message: str, *, collective: str, group: str, reason: str) -> None:
        super().__init__(message)
        self.collective = collective
        self.group = group
        self.reason = reason


class Exchange(Protocol):
    """Carries one all-gather round between the workers of an allocation."""

    @property
    def allocation_id(self) -> str: ...

    def all_gather(
        self, *, group: str, seq: int, rank: int, size: int, data: bytes, timeout: float
    ) -> list[bytes]: ...

    def close(self) -> None: ...


# Sequence numbers are per process, not per DistributedContext: a context created after an
# earlier one was closed must not reuse numbers the master has already seen for its group.
_seq_lock = threading.Lock()
_next_seq: dict[tuple[str, str, int], int] = {}


def _take_seq(allocation_id: str, group: str, rank: int) -> int:
    with _seq_lock:
        key = (allocation_id, group, rank)
        seq = _next_seq.get(key, 0)
        _next_seq[key] = seq + 1
        return seq


class DistributedContext:
    """This worker's place in a distributed task, and collectives among the workers.

    ``rank``/``size`` place the worker in the whole task, ``local_rank``/``local_size`` on
    its machine, ``cross_rank``/``cross_size`` give the machine's index and the number of
    machines. Rank 0 is the chief. Build one with ``from_torch_distributed()``,
    ``from_deepspeed()`` or ``from_horovod(hvd)`` inside a launcher, or directly.

    ``chief_ip``, ``pub_port``, ``pull_port``, ``port_offset`` and ``force_tcp`` are accepted
    for compatibility with Determined and not needed: collectives go through the master.
    """

    def __init__(
        self,
        *,
        rank: int,
        size: int,
        local_rank: int,
        local_size: int,
        cross_rank: int,
        cross_size: int,
        chief_ip: str | None = None,
        pub_port: int = 12360,
        pull_port: int = 12376,
        port_offset: int = 0,
        force_tcp: bool = False,
    ) -> None:
        values = {
            "rank": rank,
            "size": size,
            "local_rank": local_rank,
            "local_size": local_size,
            "cross_rank": cross_rank,
            "cross_size": cross_size,
        }
        for name, value in values.items():
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(
                    f"DistributedContext({name}=...) must be an int, not {value!r}; pass all six "
                    "of rank, size, local_rank, local_size, cross_rank and cross_size"
                )
        for index, total in (
            ("rank", "size"),
            ("local_rank", "local_size"),
            ("cross_rank", "cross_size"),
        ):
            if values[total] < 1 or not 0 <= values[index] < values[total]:
                raise ValueError(
                    f"DistributedContext needs 0 <= {index} < {total}, got {index}={values[index]} "
                    f"and {total}={values[total]}"
                )
        if local_size > size or cross_size > size:
            raise ValueError(
                f"DistributedContext got local_size={local_size} and cross_size={cross_size} "
                f"for size={size}; neither can exceed size"
            )
        self.rank = rank
        self.size = size
        self.local_rank = local_rank
        self.local_size = local_size
        self.cross_rank = cross_rank
        self.cross_size = cross_size
        self._chief_ip = chief_ip
        self._exchange: Exchange | None = None
        self._owns_exchange = False
        self._closed = False
        self._timeout = DEFAULT_COLLECTIVE_TIMEOUT
        self._lock = threading.Lock()

    # Construction from launchers' environments.

    @classmethod
    def from_torch_distributed(cls, chief_ip: str | None = None) -> DistributedContext:
        """Build one from the variables torchrun (``determined.launch.torch_distributed``)
        sets: ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``, ``GROUP_RANK``,
        ``GROUP_WORLD_SIZE``."""
        env = _Env(os.environ, "from_torch_distributed", "determined.launch.torch_distributed")
        return cls(
            rank=env.get("RANK"),
            size=env.get("WORLD_SIZE"),
            local_rank=env.get("LOCAL_RANK"),
            local_size=env.get("LOCAL_WORLD_SIZE"),
            cross_rank=env.get("GROUP_RANK"),
            cross_size=env.get("GROUP_WORLD_SIZE"),
            chief_ip=chief_ip or os.environ.get("DET_CHIEF_IP"),
        )

    @classmethod
    def from_deepspeed(cls, chief_ip: str | None = None) -> DistributedContext:
        """Build one from the variables the DeepSpeed launcher sets (``RANK``, ``WORLD_SIZE``,
        ``LOCAL_RANK``, ``LOCAL_SIZE``, ``CROSS_RANK``, ``CROSS_SIZE``; torchrun's names and
        OpenMPI's ``OMPI_COMM_WORLD_*`` are read when those are absent)."""
        env = _Env(os.environ, "from_deepspeed", "determined.launch.deepspeed")
        rank = env.get("RANK", "OMPI_COMM_WORLD_RANK")
        size = env.get("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE")
        local_rank = env.get("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK")
        local_size = env.get("LOCAL_SIZE", "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE")
        if local_size < 1:
            raise ValueError(f"DistributedContext.from_deepspeed(): local size {local_size} < 1")
        # Nodes run the same number of workers, so a missing node index can be derived.
        cross_rank = env.get(
            "CROSS_RANK", "GROUP_RANK", "OMPI_COMM_WORLD_NODE_RANK", default=rank // local_size
        )
        cross_size = env.get("CROSS_SIZE", "GROUP_WORLD_SIZE", default=max(1, size // local_size))
        return cls(
            rank=rank,
            size=size,
            local_rank=local_rank,
            local_size=local_size,
            cross_rank=cross_rank,
            cross_size=cross_size,
            chief_ip=chief_ip or os.environ.get("DET_CHIEF_IP"),
        )

    @classmethod
    def from_tf_config(cls) -> tuple[DistributedContext, Any]:
        """A ``DistributedContext`` and a ``tf.distribute.Strategy`` from ``TF_CONFIG``
        (which ``determined.launch.tensorflow`` sets when a trial spans several containers).

        Several workers in ``TF_CONFIG`` give a ``MultiWorkerMirroredStrategy`` (one worker
        per container, the first one the chief); otherwise a ``MirroredStrategy`` when this
        machine has more than one GPU, else TensorFlow's default strategy.
        """
        import json

        import tensorflow as tf

        raw = os.environ.get("TF_CONFIG")
        if raw:
            try:
                tf_config = json.loads(raw)
                task_type = tf_config["task"]["type"]
                workers = list(tf_config["cluster"]["worker"])
                index = int(tf_config["task"]["index"])
            except (ValueError, KeyError, TypeError) as e:
                raise ValueError(
                    f"DistributedContext.from_tf_config(): TF_CONFIG is malformed ({e}): {raw}"
                ) from None
            if task_type != "worker":
                raise RuntimeError(
                    "DistributedContext.from_tf_config() only supports the default strategy, "
                    "MirroredStrategy or MultiWorkerMirroredStrategy, but found unexpected "
                    f'task_type="{task_type}" in TF_CONFIG ({raw})'
                )
            if len(workers) > 1:
                dist = cls(
                    rank=index,
                    size=len(workers),
                    local_rank=0,
                    local_size=1,
                    cross_rank=index,
                    cross_size=len(workers),
                    chief_ip=str(workers[0]).split(":")[0],
                )
                return dist, tf.distribute.MultiWorkerMirroredStrategy()
        dist = cls(rank=0, size=1, local_rank=0, local_size=1, cross_rank=0, cross_size=1)
        gpus = len(tf.config.list_physical_devices("GPU"))
        strategy = tf.distribute.MirroredStrategy() if gpus > 1 else tf.distribute.get_strategy()
        return dist, strategy

    @classmethod
    def from_horovod(cls, hvd: Any, chief_ip: str | None = None) -> DistributedContext:
        """Build one from an initialized Horovod module (``import horovod.torch as hvd``)."""
        return cls(
            rank=hvd.rank(),
            size=hvd.size(),
            local_rank=hvd.local_rank(),
            local_size=hvd.local_size(),
            cross_rank=hvd.cross_rank(),
            cross_size=hvd.cross_size(),
            chief_ip=chief_ip or os.environ.get("DET_CHIEF_IP"),
        )

    # Accessors (Determined has both the attributes and these getters).

    def get_rank(self) -> int:
        """This worker's index among all workers (0 is the chief)."""
        return self.rank

    def get_local_rank(self) -> int:
        """This worker's index among the workers on its machine."""
        return self.local_rank

    def get_size(self) -> int:
        """The number of workers."""
        return self.size

    def get_local_size(self) -> int:
        """The number of workers on this machine."""
        return self.local_size

    def get_cross_rank(self) -> int:
        """This machine's index among the task's machines."""
        return self.cross_rank

    def get_cross_size(self) -> int:
        """The number of machines."""
        return self.cross_size

    def get_num_agents(self) -> int:
        """The number of machines (agents) the task runs on."""
        return self.cross_size

    # Collectives.

    def allgather(self, stuff: Any) -> list[Any]:
        """Every worker gets the list of every worker's ``stuff``, in rank order."""
        return self._all_gather("allgather", WORLD_GROUP, self.rank, self.size, stuff)

    def allgather_local(self, stuff: Any) -> list[Any]:
        """Every worker gets the list of ``stuff`` from the workers on its machine."""
        return self._all_gather(
            "allgather_local", self._local_group, self.local_rank, self.local_size, stuff
        )

    def gather(self, stuff: Any) -> list[Any] | None:
        """The chief gets the list of every worker's ``stuff``; the others get None."""
        out = self._all_gather("gather", WORLD_GROUP, self.rank, self.size, stuff)
        return out if self.rank == 0 else None

    def gather_local(self, stuff: Any) -> list[Any] | None:
        """The local chief gets its machine's ``stuff`` list; the others get None."""
        out = self._all_gather(
            "gather_local", self._local_group, self.local_rank, self.local_size, stuff
        )
        return out if self.local_rank == 0 else None

    def broadcast(self, stuff: Any) -> Any:
        """Every worker gets the chief's ``stuff`` (what the others pass is ignored)."""
        mine = stuff if self.rank == 0 else None
        return self._all_gather("broadcast", WORLD_GROUP, self.rank, self.size, mine)[0]

    def broadcast_local(self, stuff: Any = None) -> Any:
        """Every worker gets its local chief's ``stuff``."""
        mine = stuff if self.local_rank == 0 else None
        out = self._all_gather(
            "broadcast_local", self._local_group, self.local_rank, self.local_size, mine
        )
        return out[0]

    def close(self) -> None:
        """Release the connection used for collectives (if this context opened one)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            exchange, owned = self._exchange, self._owns_exchange
            self._exchange = None
        if exchange is not None and owned:
            exchange.close()

    @property
    def _local_group(self) -> str:
        return f"local.{self.cross_rank}"

    def _attach(self, exchange: Exchange) -> None:
        """Use ``exchange`` (owned by a core.Context) unless collectives already have one."""
        with self._lock:
            if self._exchange is None and not self._closed:
                self._exchange = exchange
                self._owns_exchange = False

    def _get_exchange(self, collective: str) -> Exchange:
        with self._lock:
            if self._closed:
                raise RuntimeError(
                    f"DistributedContext.{collective}() was called after close() (closing a "
                    "core.Context closes its DistributedContext); create a new one"
                )
            if self._exchange is not None:
                return self._exchange
            info = det.get_cluster_info()
            if info is None:
                raise RuntimeError(
                    f"DistributedContext.{collective}() with size={self.size} needs a pydet "
                    "master to exchange data through, and this process is not a pydet task "
                    "(det.get_cluster_info() is None). Run it on the cluster, or off-cluster "
                    "use a single process (size=1)"
                )
            from determined.core import _rpc, _session

            session = _session.Session(
                info.master_url, info.session_token, cert_file=info.master_cert_file
            )
            self._exchange = _rpc.MasterClient(
                session, allocation_id=info.allocation_id, owns_session=True
            )
            self._owns_exchange = True
            return self._exchange

    def _all_gather(
        self, collective: str, group: str, rank: int, size: int, stuff: Any
    ) -> list[Any]:
        if size == 1:
            return [stuff]
        # Imported here: only a task with more than one worker needs it (~4 ms of a start).
        import pickle

        try:
            data = pickle.dumps(stuff)
        except Exception as e:
            raise TypeError(
                f"DistributedContext.{collective}() needs a picklable object: {e}"
            ) from e
        exchange = self._get_exchange(collective)
        seq = _take_seq(exchange.allocation_id, group, rank)
        try:
            parts = exchange.all_gather(
                group=group, seq=seq, rank=rank, size=size, data=data, timeout=self._timeout
            )
        except (errors.Aborted, errors.DeadlineExceeded) as e:
            reason = (
                "a peer exited or the task is ending"
                if isinstance(e, errors.Aborted)
                else f"not every worker joined within {self._timeout:.0f}s"
            )
            raise CollectiveError(
                f"DistributedContext.{collective}() (group {group!r}, call #{seq}) cannot "
                f"complete: {reason} ({e.message})",
                collective=collective,
                group=group,
                reason=e.message,
            ) from None
        if len(parts) != size:
            raise CollectiveError(
                f"DistributedContext.{collective}() (group {group!r}, call #{seq}) got "
                f"{len(parts)} answers for {size} workers",
                collective=collective,
                group=group,
                reason="wrong number of answers",
            )
        return [pickle.loads(part) for part in parts]


class DummyDistributedContext(DistributedContext):
    """A single worker: rank 0 of 1; every collective returns immediately."""

    def __init__(self) -> None:
        super().__init__(rank=0, size=1, local_rank=0, local_size=1, cross_rank=0, cross_size=1)


class _Env:
    """Reads launcher variables; a missing or malformed one is an error that names it."""

    def __init__(self, env: Mapping[str, str], method: str, launcher: str) -> None:
        self._env = env
        self._method = method
        self._launcher = launcher

    def get(self, *names: str, default: int | None = None) -> int:
        for name in names:
            raw = self._env.get(name)
            if raw is None or raw == "":
                continue
            try:
                return int(raw)
            except ValueError:
                raise RuntimeError(
                    f"DistributedContext.{self._method}(): environment variable {name}={raw!r} "
                    "is not an integer"
                ) from None
        if default is not None:
            return default
        raise RuntimeError(
            f"DistributedContext.{self._method}(): environment variable "
            f"{_either(names)} is not set. Run the script under its launcher "
            f"(python3 -m {self._launcher} ...), or build "
            "DistributedContext(rank=..., size=..., local_rank=..., local_size=..., "
            "cross_rank=..., cross_size=...) yourself"
        )


def _either(names: Sequence[str]) -> str:
    if len(names) == 1:
        return names[0]
    return f"{names[0]} (or {', '.join(names[1:])})"
