"""Warm-starting a search (``searcher.source_experiment_id``): an old experiment's finished
trials seed Optuna's study and ASHA's rungs, and the seeded search replays the same after a
save and load, without importing anything twice."""

from __future__ import annotations

import json
import random
from typing import Any

from optuna.trial import TrialState

from pydet.master.search import searcher
from pydet.master.search.adaptive import AdaptiveASHASearch
from pydet.master.search.base import ImportedTrial
from pydet.master.search.optuna_study import OptunaSearch
from tests.unit import search_sim as sim

HPS: dict[str, Any] = {
    "x": {"type": "double", "minval": 0.0, "maxval": 1.0},
    "depth": {"type": "int", "minval": 1, "maxval": 8},
    "act": {"type": "categorical", "vals": ["relu", "tanh"]},
}


def old_trials(n: int, *, loss: float = 0.5, at: tuple[int, ...] = (8,)) -> list[ImportedTrial]:
    rng = random.Random(7)
    return [
        ImportedTrial(
            experiment_id=1,
            trial_id=100 + i,
            hparams={"x": rng.random(), "depth": rng.randint(1, 8), "act": "tanh"},
            metrics={"loss": loss + i / 100},
            history=[[float(step), loss + i / 100] for step in at],
            length=max(at),
        )
        for i in range(n)
    ]


def loss(trial: sim.SimTrial, length: int, rng: random.Random) -> float:
    return abs(float(trial.hparams["x"]) - 0.3) + 1 / length


def optuna_cfg(**fields: Any) -> Any:
    settings = {"name": "optuna", "metric": "loss", "max_trials": 6, "max_length": 8}
    return sim.config({**settings, **fields}, HPS)


def seeded(cfg: Any, trials: list[ImportedTrial], seed: int = 3) -> searcher.SearchMethod:
    method = searcher.new_search(cfg, seed)
    method.import_trials(trials)
    return method


def test_optuna_study_gets_the_old_trials_as_completed_trials_with_their_values() -> None:
    old = old_trials(4)
    method = seeded(optuna_cfg(), old)
    assert isinstance(method, OptunaSearch)
    done = method.study.get_trials(deepcopy=False)
    assert [t.state for t in done] == [TrialState.COMPLETE] * 4
    assert [t.values for t in done] == [[t.metrics["loss"]] for t in old]
    assert [t.params["x"] for t in done] == [t.hparams["x"] for t in old]
    # The categorical value goes in as this space's index of it ("tanh" is the second).
    assert {t.params["act"] for t in done} == {1}
    s = sim.Simulator(method, metric_fn=loss).run()
    # The new search still runs its own budget, on top of the imported trials.
    assert len(s.trials) == 6 and s.shutdown
    assert len(method.study.get_trials(deepcopy=False)) == 10


def test_old_trials_that_do_not_fit_the_new_space_are_skipped_with_the_reason() -> None:
    old = old_trials(3)
    old[0] = ImportedTrial(1, 7, {"x": 2.5, "depth": 3, "act": "relu"}, {"loss": 0.1}, [], 8)
    old[1] = ImportedTrial(1, 8, {"x": 0.5, "depth": 3, "act": "gelu"}, {"loss": 0.1}, [], 8)
    method = searcher.new_search(optuna_cfg(), 3)
    skipped = method.import_trials(old)
    assert skipped == {
        7: "skipped: x=2.5 is outside [0.0, 1.0]",
        8: "skipped: act='gelu' is not one of this search's values",
    }
    assert isinstance(method, OptunaSearch)
    assert len(method.study.get_trials(deepcopy=False)) == 1


def test_seeded_optuna_search_replays_the_same_after_a_restart_without_importing_again() -> None:
    cfg = optuna_cfg(max_concurrent_trials=2)
    old = old_trials(5)
    s = sim.Simulator(seeded(cfg, old), metric_fn=loss).run()
    assert s.shutdown
    for restore_at in (0, 3, len(s.log) // 2):
        # Restored into a method built with another seed and never told of the import: the
        # state alone carries the imported trials.
        sim.replay(
            s.log,
            lambda: seeded(cfg, old),
            restore_at=restore_at,
            restored=lambda: searcher.new_search(cfg, 99),
        )
    state = json.loads(json.dumps(s.method.state_dict()))
    restored = searcher.new_search(cfg, 99)
    restored.load_state_dict(state)
    assert isinstance(restored, OptunaSearch)
    assert len(restored.study.get_trials(deepcopy=False)) == 5 + 6


def test_tpe_models_the_old_trials_from_its_first_new_trial() -> None:
    # Ten old trials fill TPE's random start-up: unseeded, the first trial is drawn at random;
    # seeded, it is proposed from the model of the old results.
    old = old_trials(10)
    plain = searcher.new_search(optuna_cfg(), 3).initial_operations()
    warm = seeded(optuna_cfg(), old).initial_operations()
    assert [op.hparams for op in plain if isinstance(op, searcher.Create)] != [
        op.hparams for op in warm if isinstance(op, searcher.Create)
    ]


def asha_cfg(**fields: Any) -> Any:
    settings = {
        "name": "adaptive_asha",
        "metric": "loss",
        "max_trials": 8,
        "max_length": 1600,
        "mode": "aggressive",
    }
    return sim.config({**settings, **fields}, HPS)


def promoted_to(s: sim.Simulator, length: int) -> set[str]:
    return {
        op.request_id
        for call in s.log
        for op in call.ops
        if isinstance(op, searcher.ValidateAfter) and op.length == length
    }


def index_loss(trial: sim.SimTrial, length: int, rng: random.Random) -> float:
    return float(trial.index)


def test_asha_promotes_no_new_trial_that_does_not_beat_the_old_results() -> None:
    # Two rungs (400, 1600): without old results, 2 of 8 trials reach the top rung.
    assert (
        len(promoted_to(sim.Simulator(seeded(asha_cfg(), []), metric_fn=index_loss).run(), 1600))
        == 2
    )
    better = old_trials(8, loss=-100.0, at=(400, 1600))
    s = sim.Simulator(seeded(asha_cfg(), better), metric_fn=index_loss).run()
    assert s.shutdown and len(s.trials) == 8  # old trials do not count towards max_trials
    assert promoted_to(s, 1600) == set()
    # Worse old results leave more room at the top: the new trials' share grows.
    worse = old_trials(8, loss=100.0, at=(400, 1600))
    s = sim.Simulator(seeded(asha_cfg(), worse), metric_fn=index_loss).run()
    assert len(promoted_to(s, 1600)) > 2


def test_asha_ranks_an_old_trial_at_a_rung_by_its_result_no_later_than_that_rung() -> None:
    method = searcher.new_search(asha_cfg(), 3)
    assert isinstance(method, AdaptiveASHASearch)
    trained = ImportedTrial(1, 5, {"x": 0.1}, {"loss": 1.0}, [[400.0, 5.0], [1600.0, 1.0]], 1600)
    short = ImportedTrial(1, 6, {"x": 0.1}, {"loss": 2.0}, [[400.0, 2.0]], 400)
    never = ImportedTrial(1, 7, {"x": 0.1}, {"loss": 2.0}, [[100.0, 2.0]], 100)
    assert method.import_trials([trained, short, never]) == {
        7: "skipped: no loss reported at a rung's length"
    }
    bottom, top = method.brackets[0].rungs
    assert sorted(zip(bottom.ids, bottom.losses, strict=True)) == [("x5", 5.0), ("x6", 2.0)]
    assert list(zip(top.ids, top.losses, strict=True)) == [("x5", 1.0)]


def test_seeded_asha_replays_the_same_after_a_restart() -> None:
    cfg = asha_cfg(max_concurrent_trials=3)
    old = old_trials(6, loss=3.0, at=(400, 1600))
    s = sim.Simulator(seeded(cfg, old), metric_fn=index_loss).run()
    assert s.shutdown
    sim.replay(
        s.log,
        lambda: seeded(cfg, old),
        restore_at=len(s.log) // 2,
        restored=lambda: searcher.new_search(cfg, 99),
    )


def test_random_search_runs_its_own_budget_unchanged_by_old_trials() -> None:
    cfg = sim.config({"name": "random", "metric": "loss", "max_trials": 4, "max_length": 8}, HPS)
    plain = sim.Simulator(searcher.new_search(cfg, 3), metric_fn=loss).run()
    warm = sim.Simulator(seeded(cfg, old_trials(5)), metric_fn=loss).run()
    assert [c.ops for c in plain.log] == [c.ops for c in warm.log]
