"""The PyTorchTrial training loop off-cluster: real torch on CPU, the Core API's stand-ins.

Reports are observed through a recording ``TrainContext``; multi-op searches through a
``SearcherContext`` whose master is an in-memory script.
"""

from __future__ import annotations

import importlib.util
import json
import pathlib
import sys
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest
import torch

from determined import core, pytorch
from determined.core import EarlyExitReason

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "pytorch_trial"
DIGITS_TRAIN_RECORDS = 1438  # load_digits' 1797 images less the 20% validation split
HPARAMS = {"global_batch_size": 32, "lr": 0.1, "hidden": 32, "optimizer": "sgd"}


def load_example() -> ModuleType:
    """The example's model_def, under a name no other test module uses."""
    name = "pydet_example_digits_model_def"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, EXAMPLE / "model_def.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def config(
    max_length: Any = None, *, metric: str = "validation_loss", **extra: Any
) -> dict[str, Any]:
    searcher: dict[str, Any] = {"name": "single", "metric": metric}
    if max_length is not None:
        searcher["max_length"] = max_length
    return {"searcher": searcher, "scheduling_unit": 10, **extra}


class RecordingTrain(core.DummyTrainContext):
    """The off-cluster TrainContext, also keeping every report."""

    def __init__(self) -> None:
        super().__init__()
        self.training: list[tuple[int, dict[str, Any]]] = []
        self.validation: list[tuple[int, dict[str, Any]]] = []
        self.early_exits: list[EarlyExitReason] = []

    def report_training_metrics(
        self,
        steps_completed: int,
        metrics: dict[str, Any],
        batch_metrics: list[dict[str, Any]] | None = None,
    ) -> None:
        super().report_training_metrics(steps_completed, metrics, batch_metrics)
        self.training.append((steps_completed, dict(metrics)))

    def report_validation_metrics(self, steps_completed: int, metrics: dict[str, Any]) -> None:
        super().report_validation_metrics(steps_completed, metrics)
        self.validation.append((steps_completed, dict(metrics)))

    def report_early_exit(self, reason: EarlyExitReason | str) -> None:
        super().report_early_exit(reason)
        self.early_exits.append(EarlyExitReason(reason))


class ScriptedSearcherMaster:
    """The master's side of the searcher: hands out ``lengths`` and records completions."""

    def __init__(self, lengths: list[int]) -> None:
        self.lengths = list(lengths)
        self.completed: list[tuple[int, float]] = []

    def get_searcher_op(self, trial_id: int) -> int | None:
        return self.lengths.pop(0) if self.lengths else None

    def complete_searcher_op(self, trial_id: int, length: int, metric: float) -> None:
        self.completed.append((length, metric))


def open_core(
    storage: pathlib.Path, searcher_lengths: list[int] | None = None
) -> tuple[core.Context, RecordingTrain, ScriptedSearcherMaster | None]:
    """An off-cluster Core API context with a recording TrainContext (and scripted ops)."""
    context = core.init(checkpoint_storage=str(storage))
    train = RecordingTrain()
    context.train = train
    master = None
    if searcher_lengths is not None:
        master = ScriptedSearcherMaster(searcher_lengths)
        context.searcher = core.SearcherContext(
            client=master,  # type: ignore[arg-type]  # only the searcher calls are used
            distributed=context.distributed,
            trial_id=1,
            report_progress=lambda progress: None,
            flush_metrics=lambda: None,
        )
    return context, train, master


def weights(controller: pytorch.TrialController) -> list[torch.Tensor]:
    return [p.detach().clone() for m in controller.context.models for p in m.parameters()]


def checkpoints_in(storage: pathlib.Path) -> list[pathlib.Path]:
    return sorted(p for p in storage.iterdir() if p.is_dir()) if storage.exists() else []


@pytest.fixture(autouse=True)
def off_cluster(monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path) -> Iterator[None]:
    for var in ("DET_ALLOCATION_ID", "DET_MASTER", "DET_TRIAL_ID", "WORLD_SIZE", "RANK"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)
    torch.set_num_threads(1)
    yield


def test_digits_trains_the_configured_length_and_reports_validation(
    tmp_path: pathlib.Path,
) -> None:
    digits = load_example()
    env = pytorch.TrialEnv(hparams=HPARAMS, config=config({"batches": 200}, scheduling_unit=50))
    ctx, train, _ = open_core(tmp_path / "ckpt")
    with ctx:
        controller = pytorch.TrialController(digits.DigitsTrial, ctx, env)
        assert controller.run() is pytorch.Outcome.COMPLETED

    assert controller.batches_trained == 200
    assert [steps for steps, _ in train.training] == [50, 100, 150, 200]
    assert set(train.training[-1][1]) == {"loss", "accuracy"}
    assert [steps for steps, _ in train.validation] == [200]
    final = train.validation[-1][1]
    assert final["validation_accuracy"] > 0.8
    assert final["validation_loss"] < train.training[0][1]["loss"]
    (checkpoint,) = checkpoints_in(tmp_path / "ckpt")
    assert '"steps_completed": 200' in (checkpoint / "metadata.json").read_text()
    state = torch.load(checkpoint / "state_dict.pth", weights_only=True)
    assert state["trial_state"]["batches_trained"] == 200
    assert len(state["models_state_dict"]) == len(state["optimizers_state_dict"]) == 1


def test_each_searcher_op_trains_to_its_length_and_reports_the_searcher_metric(
    tmp_path: pathlib.Path,
) -> None:
    digits = load_example()
    env = pytorch.TrialEnv(hparams=HPARAMS, config=config({"batches": 30}))
    ctx, train, master = open_core(tmp_path / "ckpt", searcher_lengths=[10, 30])
    with ctx:
        controller = pytorch.TrialController(digits.DigitsTrial, ctx, env)
        assert controller.run() is pytorch.Outcome.COMPLETED

    assert master is not None
    assert [length for length, _ in master.completed] == [10, 30]
    assert [steps for steps, _ in train.validation] == [10, 30]
    for (_, metric), (_, metrics) in zip(master.completed, train.validation, strict=True):
        assert metric == metrics["validation_loss"]
    assert len(checkpoints_in(tmp_path / "ckpt")) == 2


def test_lengths_in_records_and_epochs_become_batches(tmp_path: pathlib.Path) -> None:
    digits = load_example()
    # 100 records at 32 per batch: 4 batches (rounded up).
    env = pytorch.TrialEnv(hparams=HPARAMS, config=config({"records": 100}))
    ctx, _, _ = open_core(tmp_path / "a")
    with ctx:
        controller = pytorch.TrialController(digits.DigitsTrial, ctx, env)
        controller.run()
    assert controller.batches_trained == 4

    # One epoch without records_per_epoch: the loader's 44 full batches of 32.
    env = pytorch.TrialEnv(hparams=HPARAMS, config=config({"epochs": 1}))
    ctx, _, _ = open_core(tmp_path / "b")
    with ctx:
        controller = pytorch.TrialController(digits.DigitsTrial, ctx, env)
        controller.run()
    assert controller.batches_trained == DIGITS_TRAIN_RECORDS // 32
    assert controller.context.current_train_epoch() == 1

    # With records_per_epoch, an epoch is that many records.
    env = pytorch.TrialEnv(hparams=HPARAMS, config=config({"epochs": 2}, records_per_epoch=320))
    ctx, _, _ = open_core(tmp_path / "c")
    with ctx:
        controller = pytorch.TrialController(digits.DigitsTrial, ctx, env)
        controller.run()
    assert controller.batches_trained == 20


def test_periodic_and_initial_validation_and_checkpoints(tmp_path: pathlib.Path) -> None:
    digits = load_example()
    env = pytorch.TrialEnv(
        hparams=HPARAMS,
        config=config(
            {"batches": 40},
            min_validation_period={"batches": 15},
            min_checkpoint_period={"records": 640},  # 20 batches
            perform_initial_validation=True,
        ),
    )
    ctx, train, _ = open_core(tmp_path / "ckpt")
    with ctx:
        pytorch.TrialController(digits.DigitsTrial, ctx, env).run()

    assert [steps for steps, _ in train.validation] == [0, 15, 30, 40]
    steps = sorted(
        json.loads((c / "metadata.json").read_text())["steps_completed"]
        for c in checkpoints_in(tmp_path / "ckpt")
    )
    assert steps == [20, 40]


def test_test_mode_trains_and_validates_two_batches_and_checkpoints_once(
    tmp_path: pathlib.Path,
) -> None:
    digits = load_example()
    evaluated: list[int] = []

    class CountingTrial(digits.DigitsTrial):  # type: ignore[misc,name-defined]
        def evaluate_batch(self, batch: Any) -> dict[str, Any]:
            evaluated.append(len(batch[0]))
            return super().evaluate_batch(batch)  # type: ignore[no-any-return]

    env = pytorch.TrialEnv(
        hparams=HPARAMS,
        config=config({"batches": 500}, min_validation_period={"batches": 1}),
        test_mode=True,
    )
    ctx, train, _ = open_core(tmp_path / "ckpt")
    with ctx:
        controller = pytorch.TrialController(CountingTrial, ctx, env)
        assert controller.run() is pytorch.Outcome.COMPLETED

    assert controller.batches_trained == 2
    assert [steps for steps, _ in train.training] == [2]
    assert [steps for steps, _ in train.validation] == [2]
    assert evaluated == [32, 32]
    assert len(checkpoints_in(tmp_path / "ckpt")) == 1


def test_test_mode_needs_no_searcher_length_off_cluster(tmp_path: pathlib.Path) -> None:
    digits = load_example()
    env = pytorch.TrialEnv(hparams=HPARAMS, config={}, test_mode=True)
    ctx, _, _ = open_core(tmp_path / "ckpt")
    with ctx:
        controller = pytorch.TrialController(digits.DigitsTrial, ctx, env)
        controller.run()
    assert controller.batches_trained == 2


def test_off_cluster_without_a_length_says_where_to_set_one(tmp_path: pathlib.Path) -> None:
    digits = load_example()
    env = pytorch.TrialEnv(hparams=HPARAMS, config={})
    ctx, _, _ = open_core(tmp_path / "ckpt")
    with ctx, pytest.raises(pytorch.TrialEnvError, match=r"searcher\.max_length"):
        pytorch.TrialController(digits.DigitsTrial, ctx, env).run()


def test_a_missing_searcher_metric_is_named(tmp_path: pathlib.Path) -> None:
    digits = load_example()
    cfg = config({"batches": 3})
    cfg["searcher"]["metric"] = "val_acc"
    ctx, _, _ = open_core(tmp_path / "ckpt")
    with ctx, pytest.raises(ValueError, match=r"'val_acc'.*validation_accuracy"):
        pytorch.TrialController(digits.DigitsTrial, ctx, pytorch.TrialEnv(HPARAMS, cfg)).run()


def test_preemption_checkpoints_and_returns(tmp_path: pathlib.Path) -> None:
    digits = load_example()
    env = pytorch.TrialEnv(hparams=HPARAMS, config=config({"batches": 100}))
    ctx, train, _ = open_core(tmp_path / "ckpt")
    answers = iter([False, False, True])
    ctx.preempt.should_preempt = lambda auto_ack=True: next(answers)  # type: ignore[method-assign]
    with ctx:
        controller = pytorch.TrialController(digits.DigitsTrial, ctx, env)
        assert controller.run() is pytorch.Outcome.PREEMPTED

    assert controller.batches_trained == 30
    assert train.validation == []
    (checkpoint,) = checkpoints_in(tmp_path / "ckpt")
    assert '"steps_completed": 30' in (checkpoint / "metadata.json").read_text()


def run_to_end(
    trial_class: type[pytorch.PyTorchTrial],
    env: pytorch.TrialEnv,
    storage: pathlib.Path,
    *,
    preempt_at_call: int | None = None,
) -> tuple[pytorch.TrialController, RecordingTrain, pytorch.Outcome]:
    ctx, train, _ = open_core(storage)
    if preempt_at_call is not None:
        calls = iter(range(1, 10_000))
        ctx.preempt.should_preempt = (  # type: ignore[method-assign]
            lambda auto_ack=True: next(calls) == preempt_at_call
        )
    with ctx:
        controller = pytorch.TrialController(trial_class, ctx, env)
        outcome = controller.run()
    return controller, train, outcome


@pytest.mark.parametrize("preempt_at_call", [2, 5])  # batch 20 (epoch 0) and 50 (epoch 1)
def test_a_resumed_trial_ends_with_the_weights_of_an_uninterrupted_one(
    tmp_path: pathlib.Path, preempt_at_call: int
) -> None:
    digits = load_example()
    hparams = {**HPARAMS, "optimizer": "adam", "lr": 0.01, "dropout": 0.3}
    env = pytorch.TrialEnv(hparams=hparams, config=config({"batches": 70}), trial_seed=7)

    whole, whole_train, outcome = run_to_end(digits.DigitsTrial, env, tmp_path / "whole")
    assert outcome is pytorch.Outcome.COMPLETED

    storage = tmp_path / "paused"
    first, _, outcome = run_to_end(
        digits.DigitsTrial, env, storage, preempt_at_call=preempt_at_call
    )
    assert outcome is pytorch.Outcome.PREEMPTED
    assert first.batches_trained == preempt_at_call * 10
    (checkpoint,) = checkpoints_in(storage)

    resumed_env = pytorch.TrialEnv(
        hparams=hparams, config=env.config, trial_seed=7, latest_checkpoint=checkpoint.name
    )
    second, second_train, outcome = run_to_end(digits.DigitsTrial, resumed_env, storage)
    assert outcome is pytorch.Outcome.COMPLETED
    assert second.batches_trained == 70

    for a, b in zip(weights(whole), weights(second), strict=True):
        assert torch.equal(a, b)
    assert second_train.validation == whole_train.validation
    # Training reports after the resume match the uninterrupted run's from that point on.
    resumed_steps = [s for s, _ in second_train.training]
    assert second_train.training == [r for r in whole_train.training if r[0] in resumed_steps]


class EpochTrial(pytorch.PyTorchTrial):
    """A small regression with dropout, an epoch-stepped LR scheduler and SUM/MAX reducers."""

    def __init__(self, context: pytorch.PyTorchTrialContext) -> None:
        self.context = context
        self.model = context.wrap_model(
            torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Dropout(0.5), torch.nn.Linear(8, 1))
        )
        self.opt = context.wrap_optimizer(torch.optim.SGD(self.model.parameters(), lr=0.05))
        self.sched = context.wrap_lr_scheduler(
            torch.optim.lr_scheduler.StepLR(self.opt, step_size=1, gamma=0.5),
            pytorch.LRScheduler.StepMode.STEP_EVERY_EPOCH,
        )
        self.seen = context.wrap_reducer(lambda values: sum(values), name="records_seen")
        gen = torch.Generator().manual_seed(0)
        x = torch.randn(40, 4, generator=gen)
        self.data = torch.utils.data.TensorDataset(x, x.sum(dim=1, keepdim=True))

    def build_training_data_loader(self) -> torch.utils.data.DataLoader[Any]:
        # A plain torch loader is accepted and made resumable.
        return torch.utils.data.DataLoader(
            self.data, batch_size=self.context.get_per_slot_batch_size(), shuffle=True
        )

    def build_validation_data_loader(self) -> pytorch.DataLoader:
        return pytorch.DataLoader(self.data, batch_size=8)

    def train_batch(self, batch: Any, epoch_idx: int, batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.model(x), y)
        self.context.backward(loss)
        self.context.step_optimizer(self.opt)
        self.seen.update(len(x))
        return loss

    def evaluate_batch(self, batch: Any) -> dict[str, Any]:
        x, y = batch
        err = (self.model(x) - y).abs()
        self.seen.update(len(x))
        return {"mse": (err**2).mean(), "max_err": err.max(), "n": len(x)}

    def evaluation_reducer(self) -> dict[str, pytorch.Reducer]:
        return {"max_err": pytorch.Reducer.MAX, "n": pytorch.Reducer.SUM}


def test_exact_resume_with_a_scheduler_dropout_and_a_torch_loader(tmp_path: pathlib.Path) -> None:
    env = pytorch.TrialEnv(
        hparams={"global_batch_size": 8},
        config=config({"batches": 23}, metric="mse", scheduling_unit=3),
        trial_seed=3,
    )
    whole, whole_train, _ = run_to_end(EpochTrial, env, tmp_path / "whole")
    storage = tmp_path / "paused"
    _, _, outcome = run_to_end(EpochTrial, env, storage, preempt_at_call=4)  # batch 12
    assert outcome is pytorch.Outcome.PREEMPTED
    (checkpoint,) = checkpoints_in(storage)
    resumed = pytorch.TrialEnv(
        hparams=env.hparams, config=env.config, trial_seed=3, latest_checkpoint=checkpoint.name
    )
    second, _, _ = run_to_end(EpochTrial, resumed, storage)

    for a, b in zip(weights(whole), weights(second), strict=True):
        assert torch.equal(a, b)
    # 23 batches of 8 over 40 records: 4 whole epochs, so the LR was halved 4 times.
    assert second.trial.opt.param_groups[0]["lr"] == pytest.approx(0.05 / 16)  # type: ignore[attr-defined]
    (steps, metrics), *_ = whole_train.validation
    assert steps == 23
    assert metrics["n"] == 40
    assert metrics["records_seen"] == 40
    assert metrics["max_err"] >= metrics["mse"] ** 0.5 - 1e-6
    assert whole_train.training[0][1]["records_seen"] == 24  # 3 batches of 8


def test_set_stop_requested_validates_checkpoints_and_reports_an_early_exit(
    tmp_path: pathlib.Path,
) -> None:
    class StoppingTrial(EpochTrial):
        def train_batch(self, batch: Any, epoch_idx: int, batch_idx: int) -> torch.Tensor:
            if batch_idx == 4:
                self.context.set_stop_requested(True)
            return super().train_batch(batch, epoch_idx, batch_idx)

    env = pytorch.TrialEnv(
        hparams={"global_batch_size": 8},
        config=config({"batches": 50}, metric="mse", scheduling_unit=3),
    )
    ctx, train, _ = open_core(tmp_path / "ckpt")
    with ctx:
        controller = pytorch.TrialController(StoppingTrial, ctx, env)
        assert controller.run() is pytorch.Outcome.STOPPED
    assert controller.batches_trained == 6
    assert [s for s, _ in train.validation] == [6]
    assert train.early_exits == [EarlyExitReason.USER_REQUESTED_STOP]
    assert len(checkpoints_in(tmp_path / "ckpt")) == 1


def test_evaluate_full_dataset_gets_every_batch(tmp_path: pathlib.Path) -> None:
    class FullTrial(EpochTrial):
        evaluate_batch = pytorch.PyTorchTrial.evaluate_batch

        def evaluate_full_dataset(self, data_loader: Any) -> dict[str, Any]:
            return {"mse": 0.0, "records": sum(len(x) for x, _ in data_loader)}

    cfg = config({"batches": 2}, metric="mse")
    ctx, train, _ = open_core(tmp_path / "ckpt")
    with ctx:
        pytorch.TrialController(
            FullTrial, ctx, pytorch.TrialEnv({"global_batch_size": 8}, cfg)
        ).run()
    assert train.validation == [(2, {"mse": 0.0, "records": 40})]


def test_trial_mistakes_are_explained(tmp_path: pathlib.Path) -> None:
    class NoEval(EpochTrial):
        evaluate_batch = pytorch.PyTorchTrial.evaluate_batch

    class BadLoader(EpochTrial):
        def build_training_data_loader(self) -> Any:
            return [1, 2, 3]

    class BadMetrics(EpochTrial):
        def train_batch(self, batch: Any, epoch_idx: int, batch_idx: int) -> Any:
            super().train_batch(batch, epoch_idx, batch_idx)
            return 1.5

    env = pytorch.TrialEnv({"global_batch_size": 8}, config({"batches": 2}, metric="mse"))
    ctx, _, _ = open_core(tmp_path / "ckpt")
    with ctx:
        with pytest.raises(TypeError, match="evaluate_batch"):
            pytorch.TrialController(NoEval, ctx, env)
        with pytest.raises(TypeError, match=r"build_training_data_loader.*list"):
            pytorch.TrialController(BadLoader, ctx, env)
        with pytest.raises(TypeError, match=r"train_batch.*float"):
            pytorch.TrialController(BadMetrics, ctx, env).run()
        with pytest.raises(KeyError, match=r"'lr'.*global_batch_size"):
            pytorch.TrialController(EpochTrial, ctx, env).context.get_hparam("lr")
