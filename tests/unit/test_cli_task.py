"""`det task`: task ids and the rows of `det task list`."""

from __future__ import annotations

import pytest

from determined.api.gen import v1
from determined.common import errors
from pydet.cli import task
from pydet.master.tasks.task_summaries import task_name


def test_a_trials_task_id_names_its_experiment_and_trial() -> None:
    assert task.trial_of("3.7") == (3, 7)
    assert task_name("3.7") == "Trial 7 (Experiment 3)"
    other = "0f5c1e2a-95c6-4c38-9a3e-2f4f2d1c0b7e"
    assert task_name(other, "Command (brave-azure-otter)") == "Command (brave-azure-otter)"
    assert task_name(other) == "Task (0f5c1e2a)"


@pytest.mark.parametrize("bad", ["7", "3.", ".7", "a.b", "3.7.1"])
def test_other_task_ids_are_not_found_with_a_hint(bad: str) -> None:
    with pytest.raises(errors.NotFound, match=r"EXPERIMENT\.TRIAL"):
        task.trial_of(bad)


def test_a_row_shows_the_agents_and_the_priority_only_for_the_priority_scheduler() -> None:
    running = v1.AllocationSummary(
        task_id="3.7",
        allocation_id="3.7.1",
        name="Trial 7 (Experiment 3)",
        slots_needed=2,
        resources=[
            v1.ResourcesSummary(resources_id="c1", agent_id="b"),
            v1.ResourcesSummary(resources_id="c2", agent_id="a"),
        ],
        scheduler_type="priority",
        priority=42,
        resource_pool="default",
    )
    assert task.row(running)[5:] == ["a, b", 42, "default"]
    waiting = v1.AllocationSummary(task_id="3.8", scheduler_type="fair_share", priority=42)
    assert task.row(waiting)[5:7] == ["unassigned", "N/A"]
