from __future__ import annotations

from determined.common import expconf
from master import searcher


def config(
    searcher_cfg: dict[str, object], hps: dict[str, object] | None = None
) -> expconf.ExperimentConfig:
    return expconf.parse_experiment_config(
        {"entrypoint": "python3 train.py", "searcher": searcher_cfg, "hyperparameters": hps or {}}
    )


HPS = {
    "lr": {"type": "log", "base": 10, "minval": -4, "maxval": -1},
    "layers": {"type": "int", "minval": 1, "maxval": 4},
    "opt": {"type": "categorical", "vals": ["sgd", "adam"]},
    "group": {"dropout": {"type": "double", "minval": 0.0, "maxval": 0.5}, "fixed": 7},
}


def test_single_creates_one_trial_trained_to_max_length_then_shuts_down() -> None:
    s = searcher.new_search(config({"name": "single", "metric": "x", "max_length": 100}), seed=1)
    (create,) = s.initial_operations()
    assert isinstance(create, searcher.Create)
    assert s.on_trial_created(create.request_id) == [searcher.ValidateAfter(create.request_id, 100)]
    assert s.on_validation_completed(create.request_id, 0.5, 100) == [
        searcher.Close(create.request_id)
    ]
    assert s.on_trial_closed(create.request_id) == [searcher.Shutdown()]


def test_sampled_hyperparameters_respect_types_and_bounds() -> None:
    s = searcher.new_search(
        config({"name": "random", "metric": "x", "max_trials": 50}, HPS), seed=3
    )
    for op in s.initial_operations():
        assert isinstance(op, searcher.Create)
        hp = op.hparams
        assert 1e-4 <= hp["lr"] <= 1e-1
        assert isinstance(hp["layers"], int) and 1 <= hp["layers"] <= 4
        assert hp["opt"] in ("sgd", "adam")
        assert 0.0 <= hp["group"]["dropout"] <= 0.5 and hp["group"]["fixed"] == 7


def test_same_seed_same_trials_and_state_round_trips() -> None:
    cfg = config(
        {"name": "random", "metric": "x", "max_trials": 5, "max_concurrent_trials": 2}, HPS
    )
    a = searcher.new_search(cfg, seed=11)
    first = a.initial_operations()
    b = searcher.new_search(cfg, seed=11)
    assert b.initial_operations() == first
    restored = searcher.new_search(cfg, seed=999)
    restored.load_state_dict(a.state_dict())
    assert restored.on_trial_closed("r1") == a.on_trial_closed("r1")


def test_random_keeps_to_max_concurrent_and_max_trials() -> None:
    cfg = config({"name": "random", "metric": "x", "max_trials": 3, "max_concurrent_trials": 2})
    s = searcher.new_search(cfg, seed=0)
    assert len(s.initial_operations()) == 2
    assert len([o for o in s.on_trial_closed("r1") if isinstance(o, searcher.Create)]) == 1
    assert s.on_trial_closed("r2") == []
    assert s.on_trial_closed("r3") == [searcher.Shutdown()]
