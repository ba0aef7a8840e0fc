"""core.init() on a cluster, with the master's RPCs replaced by an in-memory fake."""

from __future__ import annotations

import asyncio
import json
import pathlib
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

import determined as det
from determined import core
from determined.common import errors
from determined.core import _rpc
from determined.core._storage import CheckpointRecord
from determined.core._train import MetricRecord


class FakeClient:
    """Stands in for ``_rpc.MasterClient``: same methods, answers from memory."""

    instances: list[FakeClient] = []

    def __init__(self, session: Any, *, allocation_id: str, owns_session: bool) -> None:
        self.session = session
        self.allocation_id = allocation_id
        self.owns_session = owns_session
        self.events: list[tuple[Any, ...]] = []
        self.ops = [3, 6]
        # Whether a completion's reply names the next op, as pydet's master does.
        self.answers_next = True
        self.preempt = False
        self.acks = 0
        self.records: dict[str, CheckpointRecord] = {}
        FakeClient.instances.append(self)

    def close(self) -> None:
        if self.owns_session:
            self.session.close()

    async def report_metrics(
        self, trial_id: int, run_id: int, records: Sequence[MetricRecord]
    ) -> None:
        for r in records:
            self.events.append(("metrics", trial_id, run_id, r.group, r.steps_completed))

    async def report_progress(self, trial_id: int, progress: float) -> None:
        self.events.append(("progress", trial_id, progress))

    def report_early_exit(self, trial_id: int, reason: str) -> None:
        self.events.append(("early_exit", trial_id, reason))

    def get_best_validation(self, experiment_id: int) -> float | None:
        return 0.125 if experiment_id == 3 else None

    def get_searcher_op(self, trial_id: int) -> int | None:
        self.events.append(("get", trial_id))
        return self.ops[0] if self.ops else None

    def complete_searcher_op(self, trial_id: int, length: int, metric: float) -> _rpc.NextOp | None:
        self.events.append(("complete", trial_id, length, metric))
        self.ops.pop(0)
        if not self.answers_next:
            return None
        return _rpc.NextOp(self.ops[0] if self.ops else None)

    async def poll_preemption(self, timeout_seconds: float) -> bool:
        await asyncio.sleep(min(timeout_seconds, 0.02))
        return self.preempt

    def ack_preemption(self) -> None:
        self.acks += 1

    def report_checkpoint(self, record: CheckpointRecord) -> None:
        self.events.append(("checkpoint", record.uuid, record.steps_completed))
        self.records[record.uuid] = record

    def get_checkpoint(self, uuid: str) -> CheckpointRecord | None:
        return self.records.get(uuid)

    def delete_checkpoints(self, uuids: list[str]) -> None:
        self.events.append(("delete", *uuids))

    def all_gather(self, **kwargs: Any) -> list[bytes]:
        raise AssertionError("a single worker needs no collective")


@pytest.fixture
def client_class(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[FakeClient]]:
    FakeClient.instances = []
    monkeypatch.setattr(_rpc, "MasterClient", FakeClient)
    yield FakeClient


@pytest.fixture
def on_cluster(monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path) -> pathlib.Path:
    config = {
        "checkpoint_storage": {"type": "shared_fs", "host_path": str(tmp_path)},
        "searcher": {"name": "single", "metric": "loss", "max_length": {"batches": 6}},
    }
    env = {
        "DET_MASTER": "127.0.0.1:1",
        "DET_ALLOCATION_ID": "alloc-1",
        "DET_TASK_ID": "task-1",
        "DET_SESSION_TOKEN": "token",
        "DET_TRIAL_ID": "7",
        "DET_EXPERIMENT_ID": "3",
        "DET_TRIAL_RUN_ID": "2",
        "DET_EXPERIMENT_CONFIG": json.dumps(config),
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    for key in ("DET_CONTAINER_ADDRS", "WORLD_SIZE"):
        monkeypatch.delenv(key, raising=False)
    return tmp_path


def test_a_trial_reports_through_the_master(
    client_class: type[FakeClient], on_cluster: pathlib.Path
) -> None:
    with det.core.init() as core_context:
        [client] = client_class.instances
        assert core_context.info is not None and core_context.info.trial is not None
        assert core_context.searcher.get_configured_units() is core.Unit.BATCHES
        steps_completed = 0
        for op in core_context.searcher.operations():
            while steps_completed < op.length:
                steps_completed += 1
                core_context.train.report_training_metrics(steps_completed, {"loss": 1.0})
                op.report_progress(steps_completed)
            core_context.train.report_validation_metrics(steps_completed, {"loss": 0.5})
            op.report_completed(0.5)
        with core_context.checkpoint.store_path({"steps_completed": steps_completed}) as (
            path,
            storage_id,
        ):
            (path / "w").write_text("w")
        assert path.parent == on_cluster
        assert core_context.checkpoint.get_metadata(storage_id) == {"steps_completed": 6}
        with core_context.checkpoint.restore_path(storage_id) as restored:
            assert (restored / "w").read_text() == "w"
        assert core_context.train.get_experiment_best_validation() == 0.125
        assert core_context.preempt.should_preempt() is False
        core_context.train.report_training_metrics(7, {"loss": 0.25})

    events = client.events
    completes = [e for e in events if e[0] == "complete"]
    assert completes == [("complete", 7, 3, 0.5), ("complete", 7, 6, 0.5)]
    # Metrics reported before a completion or a checkpoint reach the master before it.
    first_complete = events.index(completes[0])
    assert ("metrics", 7, 2, "validation", 3) in events[:first_complete]
    checkpoint = next(e for e in events if e[0] == "checkpoint")
    assert ("metrics", 7, 2, "validation", 6) in events[: events.index(checkpoint)]
    # Nothing reported before close is lost (step 7 was reported just before it).
    training = [e[4] for e in events if e[0] == "metrics" and e[3] == "training"]
    assert training == [1, 2, 3, 4, 5, 6, 7]
    progress = [e[2] for e in events if e[0] == "progress"]
    assert progress and progress[-1] == 1.0
    assert not client.session._thread.is_alive()


@pytest.mark.parametrize("answers_next", [True, False], ids=["answers", "silent"])
def test_the_next_op_comes_with_the_completion_when_the_master_gives_it(
    client_class: type[FakeClient], on_cluster: pathlib.Path, answers_next: bool
) -> None:
    with det.core.init() as core_context:
        [client] = client_class.instances
        client.answers_next = answers_next
        lengths = []
        for op in core_context.searcher.operations():
            lengths.append(op.length)
            op.report_completed(0.5)

    assert lengths == [3, 6]
    calls = [e[0] for e in client.events if e[0] in ("get", "complete")]
    if answers_next:
        assert calls == ["get", "complete", "complete"]
    else:
        assert calls == ["get", "complete", "get", "complete", "get"]


def test_preemption_is_seen_and_acknowledged_once(
    client_class: type[FakeClient], on_cluster: pathlib.Path
) -> None:
    with det.core.init() as core_context:
        [client] = client_class.instances
        assert core_context.preempt.should_preempt() is False
        client.preempt = True
        deadline = time.monotonic() + 5
        while not core_context.preempt.should_preempt(auto_ack=False):
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert client.acks == 0
        assert core_context.preempt.should_preempt() is True
        assert core_context.preempt.should_preempt() is True
        assert client.acks == 1


def test_invalid_hp_is_reported_as_an_early_exit(
    client_class: type[FakeClient], on_cluster: pathlib.Path
) -> None:
    with pytest.raises(SystemExit) as exit_info, det.core.init():
        raise det.InvalidHP("bad lr")
    assert exit_info.value.code == 0
    assert ("early_exit", 7, "invalid_hp") in client_class.instances[0].events


def test_a_multi_container_task_needs_a_distributed_context(
    client_class: type[FakeClient], on_cluster: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DET_CONTAINER_ADDRS", json.dumps(["10.0.0.1", "10.0.0.2"]))
    with pytest.raises(ValueError, match=r"runs on 2 containers.*from_torch_distributed"):
        det.core.init()


def test_a_trial_without_checkpoint_storage_is_a_clear_error(
    client_class: type[FakeClient], on_cluster: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DET_EXPERIMENT_CONFIG", json.dumps({"searcher": {}}))
    with pytest.raises(ValueError, match="no checkpoint_storage"):
        det.core.init()
    # The session opened for the failed init was closed again.
    assert not client_class.instances[0].session._thread.is_alive()


def test_deleted_checkpoint_cannot_be_restored(
    client_class: type[FakeClient], on_cluster: pathlib.Path
) -> None:
    with det.core.init() as core_context:
        with core_context.checkpoint.store_path({"steps_completed": 1}) as (_, storage_id):
            pass
        core_context.checkpoint.delete(storage_id)
        client = client_class.instances[0]
        assert ("delete", storage_id) in client.events
        with pytest.raises(errors.NotFound, match=f"checkpoint {storage_id} has no files"):
            with core_context.checkpoint.restore_path(storage_id):
                pass
