"""An experiment as a job: its settings come from its config, the one place they are kept."""

from __future__ import annotations

import dataclasses

from determined.common import expconf
from pydet.master.experiments.live import DEFAULT_PRIORITY, Experiment, Trial
from pydet.master.experiments.trial_lifecycle import TrialPhase
from pydet.master.search import searcher
from pydet.master.states import State
from pydet.master.tasks.task_list import TaskRequest


def experiment(resources: dict[str, object]) -> Experiment:
    cfg = expconf.parse_experiment_config(
        {
            "entrypoint": "python3 train.py",
            "searcher": {"name": "single", "metric": "loss", "max_length": 1},
            "resources": {"resource_pool": "gpu", **resources},
            "preemption_timeout": 7,
        }
    )
    return Experiment(
        id=3, config=cfg, state=State.ACTIVE, search=searcher.new_search(cfg, 1), job_id="j"
    )


def test_a_job_reads_its_settings_from_the_config_and_its_queue_position() -> None:
    exp = experiment({"priority": 12, "weight": 2.5, "max_slots": 4})
    assert (exp.job_id, exp.resource_pool, exp.priority, exp.weight, exp.max_slots) == (
        "j",
        "gpu",
        12,
        2.5,
        4,
    )
    assert exp.preemption_timeout == 7.0
    assert exp.order == 3.0  # submission order until a user moves it
    exp.queue_order = 1.5
    assert exp.order == 1.5


def test_a_config_without_a_priority_gets_the_default() -> None:
    assert experiment({}).priority == DEFAULT_PRIORITY


def test_a_changed_config_is_what_waiting_requests_show_the_scheduler() -> None:
    exp = experiment({"priority": 50})
    request = TaskRequest(task_id="3.1", trial_id=1, slots=1, job=exp)
    resources = dataclasses.replace(exp.config.resources, priority=5, resource_pool="cpu")
    exp.config = dataclasses.replace(exp.config, resources=resources)
    assert (request.job.priority, request.job.resource_pool) == (5, "cpu")


def test_trials_are_found_by_request_id_as_they_are_added_and_replaced() -> None:
    exp = experiment({})

    def trial(trial_id: int, request_id: str) -> Trial:
        return Trial(trial_id, exp.id, request_id, TrialPhase.QUEUED, {}, 0)

    exp.trials[1] = trial(1, "r1")
    assert exp.by_request("r1") is exp.trials[1]
    assert exp.by_request("r2") is None
    exp.trials[2] = trial(2, "r2")
    assert exp.by_request("r2") is exp.trials[2]
    # Restored from the store: new objects, and ids that now belong to other requests.
    exp.trials = {1: trial(1, "r2"), 2: trial(2, "r1")}
    assert exp.by_request("r1") is exp.trials[2]
    assert exp.by_request("r2") is exp.trials[1]
