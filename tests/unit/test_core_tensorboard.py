"""TensorBoard files in the Core API: where a trial's files are uploaded, what an upload
copies, and the scalars AUTO mode writes (read back with TensorBoard's own loader)."""

from __future__ import annotations

import pathlib

import pytest

from determined.core._tensorboard import (
    Destination,
    MetricEvents,
    TensorboardFiles,
    scalar_tag,
    storage_config,
    sync_path,
)


def test_files_go_under_determineds_layout_in_the_tensorboard_storage() -> None:
    assert sync_path("c-1", 3, 7) == "c-1/tensorboard/experiment/3/trial/7"
    ckpt = {"type": "shared_fs", "host_path": "/ckpt"}
    tb = {"type": "shared_fs", "host_path": "/tb"}
    assert storage_config({"checkpoint_storage": ckpt}) == ckpt
    assert storage_config({"checkpoint_storage": ckpt, "tensorboard_storage": tb}) == tb
    assert storage_config({"checkpoint_storage": ckpt, "tensorboard_storage": None}) == ckpt


def test_an_upload_copies_selected_new_and_changed_files_under_mangled_names(
    tmp_path: pathlib.Path,
) -> None:
    local, dest = tmp_path / "local", tmp_path / "store" / "trial"
    (local / "sub").mkdir(parents=True)
    (local / "a.txt").write_text("1")
    (local / "sub" / "b.txt").write_text("2")
    (local / "skip.tmp").write_text("x")
    files = TensorboardFiles(local, Destination(directory=dest), rank=2)

    def mangle(p: pathlib.Path, rank: int) -> pathlib.Path:
        return p.with_name(f"r{rank}-{p.name}")

    sent = files.upload(lambda p: p.suffix != ".tmp", mangle)
    assert sent == 2
    assert (dest / "r2-a.txt").read_text() == "1"
    assert (dest / "sub" / "r2-b.txt").read_text() == "2"
    assert not list(dest.rglob("*.tmp"))
    # Unchanged files are not copied again; a later call without arguments keeps the
    # selector and mangler, so nothing lands under a second name.
    assert files.upload() == 0
    (local / "a.txt").write_text("10")
    assert files.upload() == 1
    assert (dest / "r2-a.txt").read_text() == "10"
    assert sorted(p.name for p in dest.iterdir()) == ["r2-a.txt", "sub"]
    # Closing (AUTO mode) uploads the rest and removes the worker's local directory.
    (local / "c.txt").write_text("3")
    files.finish()
    assert (dest / "r2-c.txt").read_text() == "3" and not local.exists()


def test_a_mangled_path_may_not_leave_the_trials_directory(tmp_path: pathlib.Path) -> None:
    local = tmp_path / "local"
    local.mkdir()
    (local / "a").write_text("1")
    files = TensorboardFiles(local, Destination(directory=tmp_path / "store"), rank=0)
    with pytest.raises(ValueError, match="leaves the trial's TensorBoard directory"):
        files.upload(mangler=lambda p, r: pathlib.Path("..") / p)


def test_without_a_filesystem_storage_nothing_is_uploaded(tmp_path: pathlib.Path) -> None:
    (tmp_path / "a").write_text("1")
    assert TensorboardFiles(tmp_path, None, rank=0).upload() == 0


def test_metric_tags_follow_the_group() -> None:
    assert scalar_tag("training", "loss") == "loss"
    assert scalar_tag("validation", "accuracy") == "val_accuracy"
    assert scalar_tag("validation", "val_loss") == "val_loss"
    assert scalar_tag("inference", "qps") == "inference/qps"


def test_reported_metrics_are_scalars_tensorboard_reads(tmp_path: pathlib.Path) -> None:
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import (  # type: ignore[import-untyped]
        EventAccumulator,
    )

    events = MetricEvents(tmp_path)
    events.write("training", 1, {"loss": 0.5, "note": "text", "ok": True})
    events.write("training", 2, {"loss": 0.25})
    events.write("validation", 2, {"accuracy": 0.75})
    events.flush()  # what AUTO mode does before each upload: readable without a close
    acc = EventAccumulator(str(tmp_path))
    acc.Reload()
    events.close()
    assert sorted(acc.Tags()["scalars"]) == ["loss", "ok", "val_accuracy"]
    assert [(e.step, e.value) for e in acc.Scalars("loss")] == [(1, 0.5), (2, 0.25)]
    assert [(e.step, e.value) for e in acc.Scalars("val_accuracy")] == [(2, 0.75)]
