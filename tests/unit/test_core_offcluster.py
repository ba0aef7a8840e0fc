"""The Core API off-cluster: stand-ins that need no master, and Determined's walkthroughs."""

from __future__ import annotations

import contextlib
import json
import logging
import math
import pathlib
import shutil

import pytest

import determined as det
from determined import core


@pytest.fixture(autouse=True)
def off_cluster(monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path) -> None:
    for var in ("DET_ALLOCATION_ID", "DET_MASTER", "DET_TRIAL_ID", "WORLD_SIZE", "RANK"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)


def test_det_core_is_reachable_from_the_package() -> None:
    assert det.core.init is core.init
    assert det.core.DistributedContext is core.DistributedContext


def test_timm_walkthrough_runs_unchanged_off_cluster(tmp_path: pathlib.Path) -> None:
    # The fragments of the Core API timm walkthrough, as a user would paste them.
    save_path = tmp_path / "saved.pth"
    save_path.write_bytes(b"weights")

    with det.core.init() as core_context:
        info = det.get_cluster_info()
        if info is not None:
            latest_checkpoint = info.latest_checkpoint
            trial_id = info.trial.trial_id if info.trial else -1
        else:
            latest_checkpoint = None
            trial_id = -1

        train_metrics = {"loss": 0.5}
        core_context.train.report_training_metrics(steps_completed=10, metrics=train_metrics)
        eval_metrics = {"loss": 0.4, "top1": 91.0}
        core_context.train.report_validation_metrics(
            steps_completed=10,
            metrics={"val_" + k: v for k, v in eval_metrics.items()},
        )

        checkpoint_metadata = {"steps_completed": 10, "trial_id": trial_id}
        with core_context.checkpoint.store_path(checkpoint_metadata) as (path, _):
            shutil.copy2(save_path, path.joinpath("data"))
        latest_checkpoint = _

        if latest_checkpoint is not None:
            restore_path_context = core_context.checkpoint.restore_path(latest_checkpoint)
        else:
            restore_path_context = contextlib.nullcontext()
        with restore_path_context as restore_path:
            assert restore_path is not None
            checkpoint_path = restore_path.joinpath("data")
            assert checkpoint_path.read_bytes() == b"weights"

        metadata = core_context.checkpoint.get_metadata(latest_checkpoint)
        assert metadata["trial_id"] == trial_id

        assert core_context.preempt.should_preempt() is False

        lengths = []
        next_epoch = 0
        for op in core_context.searcher.operations():
            for epoch in range(next_epoch, op.length):
                op.report_progress(epoch)
            lengths.append(op.length)
            next_epoch = op.length
            op.report_completed(0.4)
        assert lengths == [1]


def test_distributed_walkthrough_runs_unchanged_on_one_worker(tmp_path: pathlib.Path) -> None:
    # From the distributed-training walkthrough, with the rank values of a lone worker.
    def save_state(x: int, steps_completed: int, trial_id: int, path: pathlib.Path) -> None:
        (path / "state").write_text(json.dumps([x, steps_completed, trial_id]))

    distributed = det.core.DistributedContext(
        rank=0, size=1, local_rank=0, local_size=1, cross_rank=0, cross_size=1, chief_ip=None
    )
    x, trial_id, increment_by = 0, -1, 2
    with det.core.init(distributed=distributed) as core_context:
        for op in core_context.searcher.operations():
            last_checkpoint_batch = None
            for steps_completed in range(1, 21):
                all_increment_bys = core_context.distributed.allgather(increment_by)
                x += sum(all_increment_bys)
                if steps_completed % 10 == 0:
                    if core_context.distributed.rank == 0:
                        core_context.train.report_training_metrics(
                            steps_completed=steps_completed, metrics={"x": x}
                        )
                        op.report_progress(steps_completed)
                        checkpoint_metadata = {"steps_completed": steps_completed}
                        with core_context.checkpoint.store_path(checkpoint_metadata) as (
                            checkpoint_directory,
                            uuid,
                        ):
                            save_state(x, steps_completed, trial_id, checkpoint_directory)
                        last_checkpoint_batch = steps_completed
                    if core_context.preempt.should_preempt():
                        return
            if core_context.distributed.rank == 0:
                core_context.train.report_validation_metrics(
                    steps_completed=steps_completed, metrics={"x": x}
                )
                op.report_completed(x)
            if core_context.distributed.rank == 0 and last_checkpoint_batch != steps_completed:
                checkpoint_metadata = {"steps_completed": steps_completed}
                with core_context.checkpoint.store_path(checkpoint_metadata) as (path, uuid):
                    save_state(x, steps_completed, trial_id, path)
                    assert uuid
    assert x == 40
    saved = sorted((tmp_path / "checkpoints").glob("*/state"))
    assert len(saved) == 2


def test_the_experimental_context_only_logs_off_cluster(caplog: pytest.LogCaptureFixture) -> None:
    class Used:
        uuid = "a-checkpoint"

    with caplog.at_level(logging.INFO), core.init() as core_context:
        assert isinstance(core_context.experimental, core.DummyExperimentalCoreContext)
        core_context.experimental.report_task_using_checkpoint(Used())
    assert "not reporting the use of checkpoint" in caplog.text


def test_training_metrics_are_logged_off_cluster(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="determined.core")
    with core.init() as core_context:
        core_context.train.report_training_metrics(5, {"loss": float("nan"), "lr": 0.1})
        core_context.train.report_metrics("custom", 6, {"tokens": 10})
    messages = "\n".join(r.getMessage() for r in caplog.records)
    assert 'report_training_metrics(steps_completed=5, metrics={"loss":NaN,"lr":0.1})' in messages
    assert "report_custom_metrics(steps_completed=6" in messages


def test_numpy_and_torch_scalars_are_reported_as_numbers(caplog: pytest.LogCaptureFixture) -> None:
    np = pytest.importorskip("numpy")
    torch = pytest.importorskip("torch")
    caplog.set_level(logging.INFO, logger="determined.core")
    with core.init() as core_context:
        core_context.train.report_training_metrics(
            np.int64(3),
            {"a": np.float32(0.5), "b": torch.tensor(2.0), "c": np.array([1, 2]), "d": math.inf},
        )
    assert '{"a":0.5,"b":2.0,"c":[1,2],"d":Infinity}' in caplog.text


def test_unserializable_metric_is_an_error_naming_the_metric() -> None:
    with core.init() as core_context, pytest.raises(TypeError, match="'model'"):
        core_context.train.report_training_metrics(1, {"loss": 1.0, "model": object()})


def test_bad_steps_completed_is_refused() -> None:
    with core.init() as core_context:
        with pytest.raises(TypeError, match="steps_completed must be an int"):
            core_context.train.report_training_metrics(1.5, {"loss": 1.0})  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="steps_completed must be >= 0"):
            core_context.train.report_validation_metrics(-1, {"loss": 1.0})


def test_progress_outside_zero_to_one_is_refused() -> None:
    with core.init() as core_context, pytest.raises(ValueError, match="between 0 and 1"):
        core_context.train.report_progress(1.5)


def test_early_exit_reasons_accept_determined_spellings() -> None:
    assert core.EarlyExitReason("invalid_hp") is core.EarlyExitReason.INVALID_HP
    assert core.EarlyExitReason("EXITED_REASON_INVALID_HP") is core.EarlyExitReason.INVALID_HP
    with core.init() as core_context:
        core_context.train.report_early_exit(core.EarlyExitReason.INVALID_HP)
        with pytest.raises(ValueError, match="unknown early exit reason"):
            core_context.train.report_early_exit("bored")


def test_invalid_hp_inside_the_context_exits_zero() -> None:
    with pytest.raises(SystemExit) as exit_info, core.init():
        raise det.InvalidHP("lr too large")
    assert exit_info.value.code == 0


def test_best_validation_is_none_off_cluster() -> None:
    with core.init() as core_context:
        assert core_context.train.get_experiment_best_validation() is None


def test_close_is_idempotent() -> None:
    core_context = core.init()
    core_context.close()
    core_context.close()


def test_searcher_op_must_be_completed_before_the_next_is_requested() -> None:
    with core.init() as core_context:
        ops = core_context.searcher.operations()
        op = next(ops)
        assert op.length == 1
        with pytest.raises(RuntimeError, match="report_completed"):
            next(ops)


def test_searcher_op_completed_twice_is_an_error() -> None:
    with core.init() as core_context:
        for op in core_context.searcher.operations():
            op.report_completed(1.0)
            with pytest.raises(RuntimeError, match="only once"):
                op.report_completed(1.0)
            with pytest.raises(RuntimeError, match=r"after op\.report_completed"):
                op.report_progress(0)


def test_chief_only_preempt_mode_refuses_workers() -> None:
    dist = core.DistributedContext(
        rank=1, size=2, local_rank=1, local_size=2, cross_rank=0, cross_size=1
    )
    with core.init(distributed=dist, preempt_mode=core.PreemptMode.ChiefOnly) as core_context:
        with pytest.raises(RuntimeError, match="ChiefOnly"):
            core_context.preempt.should_preempt()


def test_init_refuses_wrong_argument_types() -> None:
    with pytest.raises(TypeError, match="DistributedContext"):
        core.init(distributed="rank0")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"core\.init"):
        core.init(preempt_mode="sometimes")  # type: ignore[arg-type]
    with pytest.raises(NotImplementedError, match="not supported by pydet yet"):
        core.init(checkpoint_storage="gs://bucket/prefix")


def test_an_alert_off_cluster_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="determined.core"), det.core.init() as core_context:
        core_context.alert(title="loss diverged", description="loss=nan", level="WARN")
    assert "[WARN] loss diverged: loss=nan" in caplog.text


def test_trial_metadata_is_kept_in_memory_off_cluster_and_must_be_a_json_dict() -> None:
    with core.init() as core_context:
        assert core_context.train.get_metadata() == {}
        stored = core_context.train.set_metadata({"a": 1, "b": [1, 2]})
        stored["a"] = 5  # the caller's copy, not the context's
        assert core_context.train.get_metadata() == {"a": 1, "b": [1, 2]}
        with pytest.raises(TypeError, match="takes a dict"):
            core_context.train.set_metadata([1])  # type: ignore[arg-type]  # the wrong type on purpose
        with pytest.raises(TypeError, match="not JSON-able"):
            core_context.train.set_metadata({"x": object()})
