"""Several experiments share too few slots: the queue, its reordering, preemption, and
an agent lost mid-trial, on a real master with real agents."""

from __future__ import annotations

import json
import pathlib
import re
import signal
from collections.abc import Iterator

import pytest

from tests.cluster import ACTIVE_STATES, Cluster, wait_until

CONTEXT = pathlib.Path(__file__).parent / "contexts" / "preemptible"


def config(tmp_path: pathlib.Path, name: str, length: int, priority: int = 42) -> pathlib.Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(
        f"name: {name}\nentrypoint: python3 train.py\n"
        f"searcher: {{name: single, metric: step, max_length: {length}}}\n"
        f"resources: {{priority: {priority}}}\nmax_restarts: 1\n"
    )
    return path


def jobs(cluster: Cluster) -> list[dict[str, object]]:
    return list(json.loads(cluster.det("job", "list", "--json").stdout))


def steps_run(logs: str) -> list[int]:
    return [int(n) for n in re.findall(r"^.*\] step (\d+)$", logs, re.M)]


@pytest.fixture
def one_slot(tmp_path: pathlib.Path) -> Iterator[Cluster]:
    c = Cluster(
        tmp_path,
        master_config="resource_pools:\n- pool_name: default\n"
        "  scheduler: {type: priority, preemption: true}\n",
    )
    try:
        c.start_master()
        c.start_agent("agent-0", slots=1)
        yield c
    except BaseException:
        print(c.dump_logs())
        raise
    finally:
        c.close()


def test_queue_shows_who_runs_and_ahead_of_changes_who_is_next(
    one_slot: Cluster, tmp_path: pathlib.Path
) -> None:
    c = one_slot
    first = c.create(config(tmp_path, "first", 100_000), CONTEXT)
    wait_until(
        lambda: [j["summary"]["state"] for j in jobs(c)] == ["SCHEDULED"], 60, "first to run"
    )
    second = c.create(config(tmp_path, "second", 3), CONTEXT)
    third = c.create(config(tmp_path, "third", 3), CONTEXT)
    table = jobs(c)
    assert [int(j["entity_id"]) for j in table] == [first, second, third]
    assert [j["summary"]["state"] for j in table] == ["SCHEDULED", "QUEUED", "QUEUED"]
    assert table[0]["allocated_slots"] == 1 and table[1]["allocated_slots"] == 0
    listing = c.det("job", "list").stdout
    assert "Slots (acquired/needed)" in listing and "STATE_QUEUED" in listing

    c.det("job", "update", str(table[2]["job_id"]), "--ahead-of", str(table[1]["job_id"]))
    assert [int(j["entity_id"]) for j in jobs(c)] == [first, third, second]
    c.det("experiment", "kill", str(first))
    c.wait_state(third, "COMPLETED", timeout=120)
    # The third finished before the second could start: it went first.
    assert c.state(second) in (*ACTIVE_STATES, "COMPLETED")
    c.wait_state(second, "COMPLETED", timeout=120)
    t3 = c.trials(third)[0]["end_time"]
    t2 = c.trials(second)[0]["start_time"]
    assert t3 <= c.trials(second)[0]["end_time"] and t2 is not None


def test_bad_queue_updates_are_refused_whole(one_slot: Cluster, tmp_path: pathlib.Path) -> None:
    c = one_slot
    c.create(config(tmp_path, "a", 100_000), CONTEXT)
    wait_until(lambda: jobs(c), 60, "a job in the queue")
    job_id = str(jobs(c)[0]["job_id"])
    proc = c.det("job", "update", job_id, "--weight", "2", check=False)
    assert proc.returncode == 1 and "weight" in proc.stderr
    proc = c.det("job", "update-batch", f"{job_id}.priority=5", "nosuch.priority=1", check=False)
    assert proc.returncode == 1 and "nosuch" in proc.stderr
    assert jobs(c)[0]["priority"] == 42


def test_higher_priority_preempts_and_the_preempted_resumes_without_lost_work(
    one_slot: Cluster, tmp_path: pathlib.Path
) -> None:
    c = one_slot
    low = c.create(config(tmp_path, "low", 100_000, priority=50), CONTEXT)
    low_trial = wait_until(lambda: c.trials(low), 60, "a trial")[0]["id"]
    wait_until(lambda: "step 5" in c.logs(low_trial), 60, "low to make progress")
    high = c.create(config(tmp_path, "high", 3, priority=10), CONTEXT)
    assert c.wait_state(high, "COMPLETED", "ERROR", timeout=120) == "COMPLETED"
    logs = wait_until(
        lambda: (text := c.logs(low_trial)) and "resumed at step" in text and text,
        120,
        "low to resume",
    )
    assert "preempted at step" in logs
    wait_until(lambda: len(steps_run(c.logs(low_trial))) > len(steps_run(logs)) + 3, 60, "steps")
    steps = steps_run(c.logs(low_trial))
    # Every step ran, and at most the one after the last checkpoint ran twice.
    assert sorted(set(steps)) == list(range(1, max(steps) + 1))
    assert len(steps) - len(set(steps)) <= 1
    (trial,) = c.trials(low)
    assert trial["restarts"] == 0
    c.det("experiment", "kill", str(low))


def test_a_priority_change_reaches_the_scheduler_the_config_and_a_restarted_master(
    one_slot: Cluster, tmp_path: pathlib.Path
) -> None:
    c = one_slot
    running = c.create(config(tmp_path, "running", 100_000, priority=50), CONTEXT)
    wait_until(lambda: [j["summary"]["state"] for j in jobs(c)] == ["SCHEDULED"], 60, "it to run")
    waiting = c.create(config(tmp_path, "waiting", 3, priority=50), CONTEXT)
    wait_until(lambda: len(jobs(c)) == 2, 30, "both jobs in the queue")

    # The scheduler sees the new priority: the waiting job preempts the running one.
    c.det("experiment", "set", "priority", str(waiting), "10")
    assert c.experiment(waiting)["config"]["resources"]["priority"] == 10
    assert c.wait_state(waiting, "COMPLETED", "ERROR", timeout=120) == "COMPLETED"

    job_id = str(c.experiment(running)["job_id"])
    c.det("job", "update", job_id, "--priority", "5")
    for when in ("before", "after"):
        assert next(j for j in jobs(c) if j["job_id"] == job_id)["priority"] == 5, when
        assert c.experiment(running)["config"]["resources"]["priority"] == 5, when
        if when == "before":
            c.stop_master(signal.SIGKILL)
            c.start_master()
            wait_until(lambda: jobs(c), 60, "the job back in the queue")
    c.det("experiment", "kill", str(running))


def test_an_agent_lost_mid_trial_restarts_it_elsewhere_from_its_checkpoint(
    tmp_path: pathlib.Path,
) -> None:
    c = Cluster(tmp_path, reconnect_timeout=3.0)
    try:
        c.start_master()
        c.start_agent("agent-0", slots=1)
        # 200 steps of 0.1 s: the trial is still running when agent-1 has connected, even
        # on a loaded machine.
        exp = c.create(config(tmp_path, "survivor", 200), CONTEXT)
        trial_id = wait_until(lambda: c.trials(exp), 60, "a trial")[0]["id"]
        wait_until(lambda: "running on agent-0" in c.logs(trial_id), 60, "the trial on agent-0")
        c.start_agent("agent-1", slots=1)
        wait_until(lambda: "step 2" in c.logs(trial_id), 60, "a checkpoint")
        assert "finished" not in c.logs(trial_id)
        c.stop_agent("agent-0", signal.SIGKILL)
        assert c.wait_state(exp, "COMPLETED", "ERROR", timeout=180) == "COMPLETED"
        logs = c.logs(trial_id)
        assert "resumed at step" in logs
        assert "lost: agent agent-0" in logs
        (trial,) = c.trials(exp)
        assert trial["restarts"] == 1
    except BaseException:
        print(c.dump_logs())
        raise
    finally:
        c.close()


def agent_running(cluster: Cluster, exp_id: int, trial_id: int) -> str | None:
    """The agent whose slot holds the trial's allocation, if it has one."""
    for agent in cluster.get("/api/v1/agents")["agents"]:
        for slot in agent["slots"].values():
            if slot["allocationId"].startswith(f"{exp_id}.{trial_id}."):
                return str(agent["id"])
    return None


def test_disabled_agents_take_no_new_work_drain_lets_work_finish_and_enable_restores(
    tmp_path: pathlib.Path,
) -> None:
    c = Cluster(tmp_path)
    try:
        c.start_master()
        c.start_agent("agent-0", slots=1)
        c.start_agent("agent-1", slots=1)
        a = c.create(config(tmp_path, "a", 100_000), CONTEXT)
        a_trial = wait_until(lambda: c.trials(a), 60, "a trial")[0]["id"]
        x = wait_until(lambda: agent_running(c, a, a_trial), 60, "a to be placed")
        y = "agent-1" if x == "agent-0" else "agent-0"

        # Draining: what runs there keeps running, nothing new is placed there.
        c.det("agent", "disable", "--drain", x)
        slots = {r.split("|")[0].strip(): r for r in c.det("slot", "list").stdout.splitlines()}
        assert "False" in slots[x]
        steps = len(steps_run(c.logs(a_trial)))
        wait_until(lambda: len(steps_run(c.logs(a_trial))) > steps + 2, 60, "a to go on")
        c.det("experiment", "kill", str(a))
        c.wait_state(a, "CANCELED", timeout=60)
        b = c.create(config(tmp_path, "b", 100_000), CONTEXT)
        b_trial = wait_until(lambda: c.trials(b), 60, "b's trial")[0]["id"]
        assert wait_until(lambda: agent_running(c, b, b_trial), 60, "b to be placed") == y

        # Enabled again, it takes work.
        c.det("agent", "enable", x)
        d = c.create(config(tmp_path, "d", 100_000), CONTEXT)
        d_trial = wait_until(lambda: c.trials(d), 60, "d's trial")[0]["id"]
        assert wait_until(lambda: agent_running(c, d, d_trial), 60, "d to be placed") == x

        # Disabling without draining stops what runs there; it waits for a slot elsewhere.
        c.det("agent", "disable", y)
        wait_until(lambda: agent_running(c, b, b_trial) is None, 60, "b to leave the agent")
        assert c.state(b) in ACTIVE_STATES
        c.det("agent", "enable", y)
        assert wait_until(lambda: agent_running(c, b, b_trial), 60, "b to run again") == y
        wait_until(lambda: "resumed at step" in c.logs(b_trial), 60, "b to resume")
    except BaseException:
        print(c.dump_logs())
        raise
    finally:
        c.close()
