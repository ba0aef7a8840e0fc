"""``det experiment continue`` without a cluster: the hyperparameters a continued trial runs
with, a search that runs an ended trial again or creates the trials it had left (which
overrides raise a search's budget instead: test_searcher_grow)."""

from __future__ import annotations

import pytest

from pydet.master.experiments.continuation import continued_hparams
from pydet.master.search import searcher
from tests.unit.search_sim import config


def test_a_continued_trial_takes_the_hyperparameters_the_override_names() -> None:
    old = {"lr": 0.1, "sigma": -1.0, "nest": {"a": 1, "b": 2}}
    fresh = {"lr": 0.5, "sigma": 1.0, "nest": {"a": 10, "b": 20}}
    assert continued_hparams(old, fresh, {"sigma": 1.0}) == {**old, "sigma": 1.0}
    assert continued_hparams(old, fresh, {"nest": {"b": 20}}) == {
        "lr": 0.1,
        "sigma": -1.0,
        "nest": {"a": 1, "b": 20},
    }
    # A declared hyperparameter is taken whole, sampled anew.
    spec = {"type": "double", "minval": 0, "maxval": 1}
    assert continued_hparams(old, fresh, {"lr": spec})["lr"] == 0.5


def test_an_ended_single_trial_trains_again_to_the_new_length() -> None:
    search = searcher.new_search(config({"name": "single", "metric": "x", "max_length": 5}), 1)
    (create,) = search.initial_operations()
    assert isinstance(create, searcher.Create)
    rid = create.request_id
    assert search.on_trial_created(rid) == [searcher.ValidateAfter(rid, 5)]
    assert search.on_validation_completed(rid, 0.5, 5) == [searcher.Close(rid)]
    assert search.on_trial_closed(rid) == [searcher.Shutdown()]
    assert search.done

    longer = searcher.new_search(config({"name": "single", "metric": "x", "max_length": 8}), 1)
    longer.load_state_dict(search.state_dict())
    assert longer.reopen(rid) == [searcher.ValidateAfter(rid, 8)]
    assert not longer.done and longer.progress() < 1.0
    assert longer.on_validation_completed(rid, 0.4, 8) == [searcher.Close(rid)]
    assert longer.on_trial_closed(rid) == [searcher.Shutdown()]


def test_a_search_stopped_early_creates_the_trials_it_had_left() -> None:
    cfg = config({"name": "random", "metric": "x", "max_trials": 4, "max_length": 2})
    search = searcher.new_search(cfg, 1)
    created = [op for op in search.initial_operations() if isinstance(op, searcher.Create)]
    assert len(created) == 4
    # The experiment was canceled as r1 and r2 completed; r3 and r4 were never made.
    for op in created[:2]:
        search.on_trial_created(op.request_id)
        search.on_trial_closed(op.request_id)
    ops = search.refill({"r1", "r2"})
    assert [op.request_id for op in ops if isinstance(op, searcher.Create)] == ["r3", "r4"]
    assert not search.done
    # Nothing left: the search shuts down at once.
    full = searcher.new_search(cfg, 1)
    full.load_state_dict({**search.state_dict(), "finished": ["r1", "r2", "r3", "r4"]})
    assert full.refill({"r1", "r2", "r3", "r4"}) == [searcher.Shutdown()]


def test_a_search_that_cannot_run_a_trial_again_says_so() -> None:
    asha = {"name": "adaptive_asha", "metric": "x", "max_trials": 4, "max_length": 8}
    search = searcher.new_search(config(asha), 1)
    with pytest.raises(ValueError, match="adaptive_asha search cannot run a trial again"):
        search.reopen("r1")
    with pytest.raises(ValueError, match="adaptive_asha search cannot go on after it stopped"):
        search.refill(set())
