"""Checkpoints: stored in place, described by metadata.json, reported, restored, deleted."""

from __future__ import annotations

import json
import pathlib
import threading
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from determined import core
from determined.common import errors
from determined.core import _storage
from determined.core._storage import CheckpointRecord


class FakeClient:
    """The checkpoint RPCs of the master, in memory."""

    def __init__(self) -> None:
        self.allocation_id = f"alloc-{uuid.uuid4()}"
        self.records: dict[str, CheckpointRecord] = {}
        self.reported: list[CheckpointRecord] = []
        self.deleted: list[str] = []

    def report_checkpoint(self, record: CheckpointRecord) -> None:
        self.reported.append(record)
        self.records[record.uuid] = record

    def get_checkpoint(self, uuid: str) -> CheckpointRecord | None:
        return self.records.get(uuid)

    def delete_checkpoints(self, uuids: list[str]) -> None:
        self.deleted += uuids


class FakeMaster:
    """The all-gather barrier of the master, in memory."""

    def __init__(self) -> None:
        self.allocation_id = f"alloc-{uuid.uuid4()}"
        self.cond = threading.Condition()
        self.rounds: dict[tuple[str, int], dict[int, bytes]] = {}

    def all_gather(
        self, *, group: str, seq: int, rank: int, size: int, data: bytes, timeout: float
    ) -> list[bytes]:
        with self.cond:
            contributions = self.rounds.setdefault((group, seq), {})
            contributions[rank] = data
            self.cond.notify_all()
            if not self.cond.wait_for(lambda: len(contributions) == size, timeout=10):
                raise errors.DeadlineExceeded("timed out")
            return [contributions[r] for r in range(size)]

    def close(self) -> None:
        pass


def dist(rank: int = 0, size: int = 1, hosts: list[int] | None = None) -> core.DistributedContext:
    """Worker ``rank`` of ``size``, on one machine or ``hosts[i]`` workers on machine ``i``."""
    hosts = hosts or [size]
    places = [(host, local) for host, count in enumerate(hosts) for local in range(count)]
    host, local = places[rank]
    return core.DistributedContext(
        rank=rank,
        size=size,
        local_rank=local,
        local_size=hosts[host],
        cross_rank=host,
        cross_size=len(hosts),
    )


def cluster_checkpoint(
    tmp_path: pathlib.Path, client: FakeClient, distributed: core.DistributedContext
) -> core.CheckpointContext:
    flushed: list[int] = []
    return core.CheckpointContext(
        distributed=distributed,
        storage=_storage.from_config(
            {"type": "shared_fs", "host_path": str(tmp_path), "storage_path": "ckpts"},
            what="test",
        ),
        client=client,  # type: ignore[arg-type]
        trial_id=7,
        experiment_id=3,
        task_id="task-1",
        allocation_id="alloc-1",
        flush_metrics=lambda: flushed.append(1),
    )


def run_ranks(
    size: int, body: Callable[[core.DistributedContext], Any], hosts: list[int] | None = None
) -> list[Any]:
    master = FakeMaster()
    results: list[Any] = [None] * size

    def worker(rank: int) -> None:
        d = dist(rank, size, hosts)
        d._attach(master)
        try:
            results[rank] = body(d)
        except Exception as e:
            results[rank] = e

    threads = [threading.Thread(target=worker, args=(r,)) for r in range(size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return results


def test_store_path_writes_in_place_then_reports(tmp_path: pathlib.Path) -> None:
    client = FakeClient()
    ckpt = cluster_checkpoint(tmp_path, client, dist())
    with ckpt.store_path({"steps_completed": 100, "note": "x"}) as (path, storage_id):
        assert path == tmp_path / "ckpts" / storage_id
        (path / "model.bin").write_bytes(b"0123456789")
        (path / "sub").mkdir()
        (path / "sub" / "opt.bin").write_bytes(b"abc")
        assert client.reported == []
    uuid.UUID(storage_id)
    [record] = client.reported
    assert record.uuid == storage_id
    assert (record.trial_id, record.experiment_id, record.steps_completed) == (7, 3, 100)
    assert (record.task_id, record.allocation_id, record.state) == (
        "task-1",
        "alloc-1",
        "COMPLETED",
    )
    assert json.loads(record.metadata_json) == {"steps_completed": 100, "note": "x"}
    assert record.resources["model.bin"] == 10
    assert record.resources["sub/opt.bin"] == 3
    assert "metadata.json" in record.resources
    assert record.storage["type"] == "shared_fs"
    assert json.loads((path / "metadata.json").read_text()) == {"steps_completed": 100, "note": "x"}


def test_steps_completed_is_required_before_anything_is_written(tmp_path: pathlib.Path) -> None:
    ckpt = cluster_checkpoint(tmp_path, FakeClient(), dist())
    with pytest.raises(ValueError, match="must include 'steps_completed'"):
        with ckpt.store_path({"epoch": 1}):
            pytest.fail("the block must not run")
    with pytest.raises(ValueError, match="steps_completed"):
        ckpt.upload(tmp_path, None)
    with pytest.raises(TypeError, match="steps_completed'\\] must be an int"):
        with ckpt.store_path({"steps_completed": "10"}):
            pytest.fail("the block must not run")
    assert not (tmp_path / "ckpts").exists() or not any((tmp_path / "ckpts").iterdir())


def test_a_failing_block_leaves_no_checkpoint(tmp_path: pathlib.Path) -> None:
    client = FakeClient()
    ckpt = cluster_checkpoint(tmp_path, client, dist())
    with pytest.raises(OSError, match="disk full"):
        with ckpt.store_path({"steps_completed": 1}) as (path, _):
            (path / "half").write_text("x")
            raise OSError("disk full")
    assert client.reported == []
    assert list((tmp_path / "ckpts").iterdir()) == []


def test_only_the_chief_stores_unsharded_checkpoints(tmp_path: pathlib.Path) -> None:
    ckpt = cluster_checkpoint(tmp_path, FakeClient(), dist(1, 2))
    with pytest.raises(RuntimeError, match="only the chief \\(rank 0\\) may save a checkpoint"):
        with ckpt.store_path({"steps_completed": 1}):
            pass
    with pytest.raises(RuntimeError, match="this is rank 1"):
        ckpt.upload(tmp_path, {"steps_completed": 1})


def test_restore_metadata_download_and_delete(tmp_path: pathlib.Path) -> None:
    client = FakeClient()
    ckpt = cluster_checkpoint(tmp_path, client, dist())
    with ckpt.store_path({"steps_completed": 5, "trial_id": 7}) as (path, storage_id):
        (path / "a.txt").write_text("a")
        (path / "b.txt").write_text("b")
    with ckpt.restore_path(storage_id) as restored:
        assert (restored / "a.txt").read_text() == "a"
    assert ckpt.get_metadata(storage_id) == {"steps_completed": 5, "trial_id": 7}
    ckpt.download(storage_id, tmp_path / "all")
    assert sorted(p.name for p in (tmp_path / "all").iterdir()) == [
        "a.txt",
        "b.txt",
        "metadata.json",
    ]
    ckpt.download(storage_id, tmp_path / "some", selector=lambda rel: rel.startswith("a"))
    assert [p.name for p in (tmp_path / "some").iterdir()] == ["a.txt"]
    ckpt.delete(storage_id)
    assert not path.exists()
    assert client.deleted == [storage_id]


def test_unknown_checkpoint_is_an_error_naming_it(tmp_path: pathlib.Path) -> None:
    ckpt = cluster_checkpoint(tmp_path, FakeClient(), dist())
    missing = str(uuid.uuid4())
    with pytest.raises(errors.NotFound, match=missing):
        with ckpt.restore_path(missing):
            pass
    with pytest.raises(errors.NotFound, match=missing):
        ckpt.get_metadata(missing)


def test_upload_copies_a_directory_into_a_new_checkpoint(tmp_path: pathlib.Path) -> None:
    client = FakeClient()
    ckpt = cluster_checkpoint(tmp_path, client, dist())
    src = tmp_path / "src"
    (src / "nested").mkdir(parents=True)
    (src / "nested" / "w.pt").write_bytes(b"w")
    storage_id = ckpt.upload(src, {"steps_completed": 2})
    assert (tmp_path / "ckpts" / storage_id / "nested" / "w.pt").read_bytes() == b"w"
    assert client.reported[0].resources["nested/w.pt"] == 1
    assert not (src / "metadata.json").exists()


def save_shards(ckpt: core.CheckpointContext, d: core.DistributedContext) -> str:
    """Rank N saves ``model-N.pt`` and ``opt/N.pt`` with ``shards: {rankN: N}`` metadata."""
    metadata = {"steps_completed": 9, "shards": {f"rank{d.rank}": d.rank}}
    with ckpt.store_path(metadata, shard=True) as (path, storage_id):
        (path / f"model-{d.rank}.pt").write_bytes(b"x" * (d.rank + 1))
        (path / "opt").mkdir()
        (path / "opt" / f"{d.rank}.pt").write_bytes(b"o")
    return storage_id


def test_sharded_store_path_merges_every_workers_files(tmp_path: pathlib.Path) -> None:
    client = FakeClient()

    results = run_ranks(3, lambda d: save_shards(cluster_checkpoint(tmp_path, client, d), d))
    assert len(set(results)) == 1, results
    storage_id = results[0]
    [record] = client.reported
    assert record.uuid == storage_id
    assert sorted(record.resources) == [
        "metadata.json",
        "model-0.pt",
        "model-1.pt",
        "model-2.pt",
        "opt/0.pt",
        "opt/1.pt",
        "opt/2.pt",
    ]
    final = tmp_path / "ckpts" / storage_id
    assert sorted(p.name for p in final.iterdir()) == [
        "metadata.json",
        "model-0.pt",
        "model-1.pt",
        "model-2.pt",
        "opt",
    ]
    merged = json.loads((final / "metadata.json").read_text())
    assert merged == {"steps_completed": 9, "shards": {"rank0": 0, "rank1": 1, "rank2": 2}}


def test_sharded_workers_writing_the_same_file_is_an_error_naming_it(
    tmp_path: pathlib.Path,
) -> None:
    client = FakeClient()

    def body(d: core.DistributedContext) -> None:
        ckpt = cluster_checkpoint(tmp_path, client, d)
        with ckpt.store_path({"steps_completed": 1}, shard=True) as (path, _):
            (path / "model.pt").write_bytes(b"x")

    results = run_ranks(2, body)
    for error in results:
        assert isinstance(error, RuntimeError)
        assert "model.pt (ranks [0, 1])" in str(error)
    assert client.reported == []
    assert list((tmp_path / "ckpts").iterdir()) == []


def test_sharded_metadata_conflicts_are_refused_before_writing(tmp_path: pathlib.Path) -> None:
    def body(d: core.DistributedContext) -> None:
        ckpt = cluster_checkpoint(tmp_path, FakeClient(), d)
        with ckpt.store_path({"steps_completed": 10 + d.rank}, shard=True):
            pytest.fail("the block must not run")

    for error in run_ranks(2, body):
        assert isinstance(error, ValueError)
        assert "steps_completed (ranks [0, 1])" in str(error)


def test_a_worker_failing_inside_a_sharded_block_fails_all_without_hanging(
    tmp_path: pathlib.Path,
) -> None:
    client = FakeClient()

    def body(d: core.DistributedContext) -> None:
        ckpt = cluster_checkpoint(tmp_path, client, d)
        with ckpt.store_path({"steps_completed": 1}, shard=True) as (path, _):
            (path / f"{d.rank}.pt").write_bytes(b"x")
            if d.rank == 1:
                raise OSError("rank 1 ran out of disk")

    chief_error, worker_error = run_ranks(2, body)
    assert isinstance(worker_error, OSError)
    assert isinstance(chief_error, RuntimeError)
    assert "rank 1: OSError: rank 1 ran out of disk" in str(chief_error)
    assert client.reported == []


def test_sharded_upload_sends_a_shared_directory_once(tmp_path: pathlib.Path) -> None:
    client = FakeClient()
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "common.pt").write_bytes(b"c")

    def body(d: core.DistributedContext) -> str:
        ckpt = cluster_checkpoint(tmp_path, client, d)
        return ckpt.upload(shared if d.rank < 2 else None, {"steps_completed": 4}, shard=True)

    results = run_ranks(3, body)
    assert len(set(results)) == 1, results
    [record] = client.reported
    assert sorted(record.resources) == ["common.pt", "metadata.json"]


def test_off_cluster_checkpoints_live_in_a_local_directory(tmp_path: pathlib.Path) -> None:
    storage = _storage.from_config(str(tmp_path / "local"), what="test")
    ckpt = core.DummyCheckpointContext(None, storage)
    with ckpt.store_path({"steps_completed": 3}) as (path, storage_id):
        (path / "w").write_text("w")
    assert path == tmp_path / "local" / storage_id
    assert ckpt.get_metadata(storage_id) == {"steps_completed": 3}
    with ckpt.restore_path(storage_id) as restored:
        assert (restored / "w").read_text() == "w"
    ckpt.delete(storage_id)
    assert not path.exists()
    with pytest.raises(errors.NotFound, match=f"no checkpoint {storage_id} in"):
        with ckpt.restore_path(storage_id):
            pass


def test_core_init_takes_a_storage_path_or_dict(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DET_ALLOCATION_ID", raising=False)
    with core.init(checkpoint_storage=str(tmp_path / "a")) as core_context:
        with core_context.checkpoint.store_path({"steps_completed": 1}) as (path, _):
            assert path.parent == tmp_path / "a"
    config = {"type": "shared_fs", "host_path": str(tmp_path), "storage_path": "b"}
    with core.init(checkpoint_storage=config) as core_context:
        with core_context.checkpoint.store_path({"steps_completed": 1}) as (path, _):
            assert path.parent == tmp_path / "b"


def test_storage_configs() -> None:
    shared = _storage.from_config(
        {"type": "shared_fs", "host_path": "/mnt/x", "storage_path": "ckpt"}, what="t"
    )
    assert shared.base == pathlib.Path("/mnt/x/ckpt")
    absolute = _storage.from_config(
        {"type": "shared_fs", "host_path": "/mnt/x", "storage_path": "/mnt/x/y"}, what="t"
    )
    assert absolute.base == pathlib.Path("/mnt/x/y")
    directory = _storage.from_config({"type": "directory", "container_path": "/c"}, what="t")
    assert directory.path("abc") == pathlib.Path("/c/abc")
    with pytest.raises(NotImplementedError, match="'gcs' is not supported by pydet yet"):
        _storage.from_config({"type": "gcs", "bucket": "b"}, what="t")
    with pytest.raises(ValueError, match="needs host_path"):
        _storage.from_config({"type": "shared_fs"}, what="t")
    with pytest.raises(ValueError, match="not a checkpoint id"):
        directory.path("../etc")


def test_merge_metadata_merges_dicts_and_reports_disagreements() -> None:
    merge = core._checkpoint.merge_metadata
    assert merge([{"a": 1}, {"b": 2}]) == ({"a": 1, "b": 2}, {})
    assert merge([{"a": 1}, {"a": 1}]) == ({"a": 1}, {})
    assert merge([{"a": {"c": 1}}, {"a": {"d": 1}}]) == ({"a": {"c": 1, "d": 1}}, {})
    assert merge([{"a": 1}, {"a": 2}, {"a": 3}])[1] == {"a": [0, 1, 2]}
    assert merge([{"a": {"c": 1}}, {"a": 1}])[1] == {"a": [0, 1]}
