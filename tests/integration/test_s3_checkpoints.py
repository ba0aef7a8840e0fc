"""Checkpoints in S3 through the Core API, against a real S3 server (moto) on loopback.

The master's checkpoint RPCs and collectives are the in-memory fakes of the unit tests;
the objects go over HTTP to the server, and each test reads them back with its own client.
"""

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
from determined.common import s3 as s3lib
from determined.core import _storage
from pydet.master.checkpoint_storage import s3 as object_storage
from tests.cluster import free_port
from tests.s3server import SECRET_KEY, S3Server
from tests.unit.test_core_checkpoint import FakeClient, run_ranks, save_shards


@pytest.fixture
def bucket(s3: S3Server) -> str:
    return s3.bucket()


@pytest.fixture(autouse=True)
def _no_ambient_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path) -> None:
    """Only the credentials a test gives are found (no profile, no instance metadata)."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def context(
    config: dict[str, Any], client: FakeClient, distributed: core.DistributedContext | None = None
) -> core.CheckpointContext:
    return core.CheckpointContext(
        distributed=distributed or core.DummyDistributedContext(),
        storage=_storage.from_config(config, what="checkpoint_storage"),
        client=client,  # type: ignore[arg-type]
        trial_id=7,
        experiment_id=3,
        task_id="task-1",
        allocation_id="alloc-1",
        flush_metrics=lambda: None,
    )


def run_workers(hosts: list[int], body: Callable[[core.DistributedContext], Any]) -> list[Any]:
    """Run ``body`` once per worker, ``hosts[i]`` workers on machine ``i``, in threads."""
    return run_ranks(sum(hosts), body, hosts)


def saved(s3: S3Server, bucket: str, client: FakeClient, content: str = "weights") -> str:
    """A checkpoint holding the file ``w``, saved by the chief; its storage id."""
    with context(s3.storage(bucket), client).store_path({"steps_completed": 3}) as (path, sid):
        (path / "w").write_text(content)
    return sid


class CountingFetches:
    """Counts the downloads of every S3Storage (one ``fetch`` is one download)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[pathlib.Path] = []
        original = s3lib.S3Storage.fetch
        lock = threading.Lock()

        def fetch(self_: s3lib.S3Storage, storage_id: str, dst: pathlib.Path, **kw: Any) -> None:
            with lock:
                self.calls.append(dst)
            original(self_, storage_id, dst, **kw)

        monkeypatch.setattr(s3lib.S3Storage, "fetch", fetch)


def test_store_path_uploads_when_the_block_ends_and_restore_path_downloads(
    s3: S3Server, bucket: str
) -> None:
    client = FakeClient()
    ckpt = context(s3.storage(bucket), client)
    with ckpt.store_path({"steps_completed": 10}) as (path, storage_id):
        (path / "model.bin").write_bytes(b"0123456789")
        (path / "sub").mkdir()
        (path / "sub" / "opt.bin").write_bytes(b"abc")
        assert s3.objects(bucket) == {}, "nothing is uploaded before the block ends"
    assert not path.exists(), "the local copy is removed once uploaded"
    objects = s3.objects(bucket)
    base = f"runs/a/{storage_id}/"
    assert sorted(objects) == [base + "metadata.json", base + "model.bin", base + "sub/opt.bin"]
    [record] = client.reported
    # The recorded resources are what the bucket holds.
    assert record.resources == {k.removeprefix(base): v for k, v in objects.items()}
    assert record.storage["type"] == "s3" and record.storage["bucket"] == bucket

    with ckpt.restore_path(storage_id) as restored:
        assert (restored / "model.bin").read_bytes() == b"0123456789"
        assert (restored / "sub" / "opt.bin").read_bytes() == b"abc"
        assert json.loads((restored / "metadata.json").read_text()) == {"steps_completed": 10}
    assert not restored.exists(), "the download is removed when the block ends"
    assert ckpt.get_metadata(storage_id) == {"steps_completed": 10}


def test_a_failing_block_uploads_nothing(s3: S3Server, bucket: str) -> None:
    client = FakeClient()
    ckpt = context(s3.storage(bucket), client)
    with pytest.raises(OSError, match="disk full"):
        with ckpt.store_path({"steps_completed": 1}) as (path, _):
            (path / "half").write_text("x")
            raise OSError("disk full")
    assert not path.exists()
    assert client.reported == [] and s3.objects(bucket) == {}


def test_upload_download_with_a_selector_and_delete(
    s3: S3Server, bucket: str, tmp_path: pathlib.Path
) -> None:
    client = FakeClient()
    ckpt = context(s3.storage(bucket, prefix=""), client)
    src = tmp_path / "src"
    (src / "nested").mkdir(parents=True)
    (src / "nested" / "w.pt").write_bytes(b"w" * 5)
    (src / "a.txt").write_text("a")
    storage_id = ckpt.upload(src, {"steps_completed": 2})
    assert not (src / "metadata.json").exists(), "the user's directory is left as it was"
    assert sorted(s3.objects(bucket)) == [
        f"{storage_id}/a.txt",
        f"{storage_id}/metadata.json",
        f"{storage_id}/nested/w.pt",
    ]
    assert client.reported[0].resources["nested/w.pt"] == 5

    ckpt.download(storage_id, tmp_path / "all")
    assert (tmp_path / "all" / "nested" / "w.pt").read_bytes() == b"w" * 5
    ckpt.download(storage_id, tmp_path / "some", selector=lambda rel: rel.startswith("nested/"))
    assert [p.name for p in (tmp_path / "some").iterdir()] == ["nested"]

    ckpt.delete(storage_id)
    assert s3.objects(bucket) == {}
    assert client.deleted == [storage_id]


def test_sharded_store_path_uploads_every_workers_part(s3: S3Server, bucket: str) -> None:
    client = FakeClient()

    results = run_workers([2, 1], lambda d: save_shards(context(s3.storage(bucket), client, d), d))
    assert len(set(results)) == 1, results
    storage_id = results[0]
    base = f"runs/a/{storage_id}/"
    objects = {k.removeprefix(base): v for k, v in s3.objects(bucket).items()}
    parts = [f"{name}{r}.pt" for name in ("model-", "opt/") for r in range(3)]
    assert sorted(objects) == sorted(["metadata.json", *parts])
    [record] = client.reported
    assert record.resources == objects
    merged = json.loads(client.reported[0].metadata_json)
    assert merged == {"steps_completed": 9, "shards": {"rank0": 0, "rank1": 1, "rank2": 2}}


def test_sharded_workers_writing_the_same_file_upload_nothing(s3: S3Server, bucket: str) -> None:
    client = FakeClient()

    def body(d: core.DistributedContext) -> None:
        with context(s3.storage(bucket), client, d).store_path(
            {"steps_completed": 1}, shard=True
        ) as (path, _):
            (path / "model.pt").write_bytes(b"x")

    for error in run_workers([1, 1], body):
        assert isinstance(error, RuntimeError)
        assert "model.pt (ranks [0, 1])" in str(error)
    assert client.reported == [] and s3.objects(bucket) == {}


def test_sharded_upload_sends_a_directory_shared_on_a_machine_once(
    s3: S3Server, bucket: str, tmp_path: pathlib.Path
) -> None:
    client = FakeClient()
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "common.pt").write_bytes(b"c")
    own = tmp_path / "own"
    own.mkdir()
    (own / "rank2.pt").write_bytes(b"22")

    def body(d: core.DistributedContext) -> str:
        ckpt = context(s3.storage(bucket), client, d)
        return ckpt.upload(shared if d.rank < 2 else own, {"steps_completed": 4}, shard=True)

    results = run_workers([2, 1], body)
    assert len(set(results)) == 1, results
    [record] = client.reported
    assert sorted(record.resources) == ["common.pt", "metadata.json", "rank2.pt"]
    assert len(s3.objects(bucket)) == 3


def test_restore_path_downloads_once_per_machine(
    s3: S3Server, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = FakeClient()
    storage_id = saved(s3, bucket, client)
    fetches = CountingFetches(monkeypatch)

    def body(d: core.DistributedContext) -> tuple[str, str]:
        with context(s3.storage(bucket), client, d).restore_path(storage_id) as restored:
            return str(restored), (restored / "w").read_text()

    results = run_workers([3, 2], body)
    assert [text for _, text in results] == ["weights"] * 5
    # Two machines, two downloads; the workers of one machine read the same directory.
    assert len(fetches.calls) == 2
    assert len({where for where, _ in results[:3]}) == 1
    assert len({where for where, _ in results[3:]}) == 1
    assert not any(pathlib.Path(where).exists() for where, _ in results)


def test_download_is_shared_only_by_workers_passing_the_same_directory(
    s3: S3Server, bucket: str, monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path
) -> None:
    client = FakeClient()
    storage_id = saved(s3, bucket, client)
    fetches = CountingFetches(monkeypatch)

    def body(d: core.DistributedContext) -> str:
        target = tmp_path / ("shared" if d.rank < 2 else f"own-{d.rank}")
        context(s3.storage(bucket), client, d).download(storage_id, target)
        return (target / "w").read_text()

    assert run_workers([3], body) == ["weights"] * 3
    assert sorted(p.name for p in fetches.calls) == ["own-2", "shared"]


def test_a_missing_checkpoint_fails_every_worker_of_the_machine(s3: S3Server, bucket: str) -> None:
    client = FakeClient()
    storage_id = saved(s3, bucket, client)
    s3.client.delete_objects(
        Bucket=bucket,
        Delete={"Objects": [{"Key": k} for k in s3.objects(bucket)]},
    )

    def body(d: core.DistributedContext) -> None:
        with context(s3.storage(bucket), client, d).restore_path(storage_id):
            pytest.fail("the block must not run")

    for error in run_workers([2], body):
        assert isinstance(error, errors.NotFound), error
        assert storage_id in str(error)


def test_off_cluster_core_init_stores_in_s3(
    s3: S3Server, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DET_ALLOCATION_ID", raising=False)
    with core.init(checkpoint_storage=s3.storage(bucket)) as core_context:
        ckpt = core_context.checkpoint
        with ckpt.store_path({"steps_completed": 5}) as (path, storage_id):
            (path / "w").write_text("w")
        assert ckpt.get_metadata(storage_id) == {"steps_completed": 5}
        with ckpt.restore_path(storage_id) as restored:
            assert (restored / "w").read_text() == "w"
        ckpt.delete(storage_id)
        assert s3.objects(bucket) == {}
        with pytest.raises(errors.NotFound, match=f"no checkpoint {storage_id} in s3://{bucket}"):
            ckpt.get_metadata(storage_id)


def test_credentials_come_from_the_environment_when_the_config_has_none(
    s3: S3Server, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = s3.storage(bucket, access_key=None, secret_key=None)
    storage = _storage.from_config(config, what="checkpoint_storage")
    with pytest.raises(errors.FailedPrecondition, match="no S3 credentials") as refused:
        storage.exists(str(uuid.uuid4()))
    assert "AWS_ACCESS_KEY_ID" in str(refused.value)

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAFROMENVIRONMENT1")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "from-the-environment")
    client = FakeClient()
    ckpt = context(config, client)
    storage_id = ckpt.upload(
        pathlib.Path(__file__).parent / "contexts" / "preemptible", {"steps_completed": 1}
    )
    assert f"runs/a/{storage_id}/train.py" in s3.objects(bucket)


def test_a_checkpoint_recorded_without_its_credentials_is_read_with_this_tasks_own(
    s3: S3Server, bucket: str
) -> None:
    """The master shows storage configs with their secrets hidden."""
    client = FakeClient()
    ckpt = context(s3.storage(bucket), client)
    storage_id = saved(s3, bucket, client, "w")
    record = client.records[storage_id]
    shown = {**record.storage, "access_key": s3lib.SHOWN_SECRET, "secret_key": s3lib.SHOWN_SECRET}
    client.records[storage_id] = type(record)(**{**record.__dict__, "storage": shown})
    with ckpt.restore_path(storage_id) as restored:
        assert (restored / "w").read_text() == "w"


def test_the_storage_never_shows_its_secret(s3: S3Server, bucket: str) -> None:
    storage = _storage.from_config(s3.storage(bucket), what="checkpoint_storage")
    assert SECRET_KEY not in repr(storage) and SECRET_KEY not in storage.where


async def test_the_master_deletes_a_checkpoints_objects(s3: S3Server, bucket: str) -> None:
    client = FakeClient()
    kept, doomed = saved(s3, bucket, client), saved(s3, bucket, client)
    await object_storage.remove_objects(s3.storage(bucket), doomed)
    assert sorted(s3.objects(bucket)) == [f"runs/a/{kept}/metadata.json", f"runs/a/{kept}/w"]


async def test_the_master_logs_a_failed_deletion_without_the_secret(
    caplog: pytest.LogCaptureFixture,
) -> None:
    config = {
        "type": "s3",
        "bucket": "b",
        "endpoint_url": f"http://127.0.0.1:{free_port()}",
        "access_key": "AKIAEXAMPLE",
        "secret_key": SECRET_KEY,
    }
    # Nothing listens there: boto3 retries, then the master gives up and says so.
    await object_storage.remove_objects(config, str(uuid.uuid4()))
    [record] = [r for r in caplog.records if "could not delete" in r.getMessage()]
    assert "cannot be reached" in record.getMessage()
    assert SECRET_KEY not in caplog.text
