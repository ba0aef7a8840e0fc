"""What DetCallback checks before and during training, and how it turns the Trainer's logs
into reports (determined.transformers._checks; no transformers needed)."""

from __future__ import annotations

import pytest

from determined.transformers import _checks


def test_eval_logs_are_validation_and_others_training() -> None:
    assert _checks.metric_type({"eval_loss": 1.0, "epoch": 1.0}) == _checks.EVAL
    assert _checks.metric_type({"test_accuracy": 0.5}) == _checks.TEST
    assert _checks.metric_type({"loss": 1.0, "learning_rate": 0.1}) == _checks.TRAIN
    assert _checks.metric_type({"train_runtime": 3.0, "train_loss": 1.0}) == _checks.TRAIN


def test_reported_metrics_drop_the_rounded_epoch_and_speed_figures() -> None:
    logs = {
        "eval_loss": 1.5,
        "eval_runtime": 0.2,
        "eval_samples_per_second": 100.0,
        "eval_steps_per_second": 10.0,
        "eval_compilation_time": 1.0,
        "epoch": 0.4,
    }
    assert _checks.report_metrics(logs, None) == {"eval_loss": 1.5}
    assert "epoch" in logs, "the Trainer's own dict is left alone"


def test_filter_metrics_keeps_names_containing_an_entry() -> None:
    logs = {"loss": 1.0, "grad_norm": 2.0, "learning_rate": 0.1, "eval_loss": 3.0}
    assert _checks.report_metrics(logs, ["loss"]) == {"loss": 1.0, "eval_loss": 3.0}


@pytest.mark.parametrize(
    ("max_steps", "epochs", "expected"),
    [(100, 3.0, ("batches", 100, "--max_steps")), (-1, 3.0, ("epochs", 3.0, "--num_train_epochs"))],
)
def test_the_trainers_length_is_max_steps_else_epochs(
    max_steps: int, epochs: float, expected: tuple[str, float, str]
) -> None:
    assert _checks.training_length(max_steps, epochs) == expected


def test_asha_max_time_in_batches_must_match_max_steps() -> None:
    cfg = {"name": "adaptive_asha", "time_metric": "batches", "max_time": 200, "metric": "m"}
    assert _checks.check_searcher_config(cfg, 200, 3.0) == ["batches"]
    with pytest.raises(ValueError) as e:
        _checks.check_searcher_config(cfg, 100, 3.0)
    assert str(e.value) == (
        "HF trainer units does not match configured the max_time configured for adaptive_asha "
        "searcher (batches=100 != batches=200).  Please update one of the searcher.max_time "
        "config field or the --max_steps to match the other."
    )


def test_asha_max_time_in_batches_with_an_epoch_length_names_both() -> None:
    cfg = {"name": "adaptive_asha", "time_metric": "batches", "max_time": 200, "metric": "m"}
    with pytest.raises(ValueError, match=r"\(epochs=3 != batches=200\)\.") as e:
        _checks.check_searcher_config(cfg, -1, 3.0)
    assert "--num_train_epochs" in str(e.value)


def test_asha_on_a_metric_of_its_own_requires_that_metric() -> None:
    cfg = {"name": "adaptive_asha", "time_metric": "tokens", "max_time": 5000, "metric": "m"}
    assert _checks.check_searcher_config(cfg, 100, 3.0) == ["tokens"]


def test_a_legacy_max_length_must_match_and_a_bare_one_is_refused() -> None:
    assert (
        _checks.check_searcher_config({"name": "single", "max_length": {"epochs": 2}}, -1, 2.0)
        == []
    )
    with pytest.raises(ValueError, match=r"\(batches=50 != epochs=2\)"):
        _checks.check_searcher_config({"name": "single", "max_length": {"epochs": 2}}, 50, 3.0)
    with pytest.raises(ValueError, match="rely on --max_steps instead"):
        _checks.check_searcher_config({"name": "single", "max_length": 100}, 50, 3.0)
    # A filled-in config spells "no max_length" as null.
    assert _checks.check_searcher_config({"name": "single", "max_length": None}, 50, 3.0) == []


def test_validation_must_carry_the_searchers_metrics() -> None:
    _checks.check_eval_metrics({"eval_loss": 1.0, "batches": 5}, "eval_loss", "batches")
    with pytest.raises(ValueError, match=r"Searcher metric 'eval_acc' set by searcher\.metric"):
        _checks.check_eval_metrics({"eval_loss": 1.0, "batches": 5}, "eval_acc", "batches")
    with pytest.raises(ValueError, match=r"Time metric 'tokens' set by searcher\.time_metric"):
        _checks.check_eval_metrics({"eval_loss": 1.0}, "eval_loss", "tokens")
    with pytest.raises(ValueError, match="are both missing"):
        _checks.check_eval_metrics({"x": 1.0}, "eval_loss", "tokens")
