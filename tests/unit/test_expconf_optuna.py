"""The optuna searcher's settings, and the combinations Optuna cannot run refused by field."""

from __future__ import annotations

from typing import Any

import pytest

from determined.common import expconf

CATEGORICAL = {"opt": {"kind": {"type": "categorical", "vals": ["sgd", "adam"]}}}
RANGED = {"lr": {"type": "log", "base": 10, "minval": -4, "maxval": -1}}


def parse(searcher: dict[str, Any], hps: dict[str, Any] | None = None) -> expconf.ExperimentConfig:
    return expconf.parse_experiment_config(
        {"entrypoint": "python3 train.py", "searcher": searcher, "hyperparameters": hps or {}}
    )


def problems(searcher: dict[str, Any], hps: dict[str, Any] | None = None) -> str:
    with pytest.raises(expconf.InvalidConfig) as e:
        parse(searcher, hps)
    return str(e.value)


def optuna(**fields: Any) -> dict[str, Any]:
    return {"name": "optuna", "metric": "loss", "max_trials": 8, **fields}


def test_defaults_are_tpe_without_a_pruner() -> None:
    searcher = parse(optuna()).searcher
    assert isinstance(searcher, expconf.OptunaSearcher)
    assert (searcher.sampler, searcher.pruner, searcher.max_concurrent_trials) == ("tpe", None, 16)
    assert searcher.objectives == (expconf.Objective("loss", True),)


def test_pruner_settings_are_read_per_type() -> None:
    searcher = parse(
        optuna(pruner={"type": "median", "n_startup_trials": 2, "n_warmup_steps": 10})
    ).searcher
    assert isinstance(searcher, expconf.OptunaSearcher)
    assert searcher.pruner == expconf.Pruner(type="median", n_startup_trials=2, n_warmup_steps=10)
    assert "searcher.pruner.max_resource: unknown key" in problems(
        optuna(pruner={"type": "median", "max_resource": 3})
    )
    assert "searcher.pruner.type: expected one of" in problems(optuna(pruner={"type": "patient"}))


@pytest.mark.parametrize(
    "searcher",
    [
        optuna(sampler="gp", max_length={"batches": 100}, max_concurrent_trials=2),
        optuna(pruner={"type": "successive_halving", "reduction_factor": 3}),
        optuna(pruner={"type": "hyperband", "min_resource": 2, "max_resource": 90}),
        {
            "name": "optuna",
            "sampler": "nsga2",
            "max_trials": 20,
            "metrics": [{"name": "loss"}, {"name": "accuracy", "smaller_is_better": False}],
        },
    ],
)
def test_the_stored_form_reads_back_the_same(searcher: dict[str, Any]) -> None:
    cfg = parse(searcher, RANGED)
    assert parse(cfg.searcher.to_dict(), RANGED).searcher == cfg.searcher


def test_several_metrics_make_a_multi_objective_search_led_by_the_first() -> None:
    searcher = parse(
        {
            "name": "optuna",
            "sampler": "nsga2",
            "max_trials": 20,
            "metrics": [
                {"name": "error", "smaller_is_better": True},
                {"name": "speed", "smaller_is_better": False},
            ],
        }
    ).searcher
    assert isinstance(searcher, expconf.OptunaSearcher)
    assert [o.name for o in searcher.objectives] == ["error", "speed"]
    # Checkpoint policy and best-trial views keep working from the first metric.
    assert (searcher.metric, searcher.smaller_is_better) == ("error", True)


def test_cmaes_refuses_categorical_hyperparameters_naming_them() -> None:
    message = problems(optuna(sampler="cmaes"), {**RANGED, **CATEGORICAL})
    assert "hyperparameters.opt.kind: the cmaes sampler (searcher.sampler) cannot" in message
    parse(optuna(sampler="tpe"), CATEGORICAL)
    parse(optuna(sampler="cmaes"), RANGED)


def test_multi_objective_refuses_a_single_objective_sampler_and_pruning() -> None:
    metrics = [{"name": "a"}, {"name": "b"}]
    assert "searcher.sampler: the cmaes sampler optimizes one objective" in problems(
        {"name": "optuna", "sampler": "cmaes", "max_trials": 2, "metrics": metrics}
    )
    assert "searcher.pruner: Optuna prunes only single-objective searches" in problems(
        {"name": "optuna", "max_trials": 2, "metrics": metrics, "pruner": {"type": "median"}}
    )


def test_metric_or_metrics_but_not_both_nor_neither() -> None:
    assert "searcher.metric: required" in problems({"name": "optuna", "max_trials": 2})
    assert "searcher.metrics: set either metric or metrics" in problems(
        optuna(metrics=[{"name": "a"}, {"name": "b"}])
    )
    assert "searcher.metrics[1]: metric 'a' is listed twice" in problems(
        {"name": "optuna", "max_trials": 2, "metrics": ["a", "a"]}
    )


def test_budget_fields_are_checked() -> None:
    assert "searcher.max_trials: required" in problems({"name": "optuna", "metric": "m"})
    assert "searcher.sampler: expected one of" in problems(optuna(sampler="bayes"))
    assert "searcher.pruner.max_resource: must be >= min_resource" in problems(
        optuna(pruner={"type": "hyperband", "min_resource": 10, "max_resource": 5})
    )
