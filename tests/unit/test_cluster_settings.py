"""What admins set for the whole cluster (master/cluster/) and the master's own log
(master/logs/master_log.py), on a real store: the cluster message's times, config policies'
parsing, merging and limits, a trial's own log retention, and the usage sums."""

from __future__ import annotations

import asyncio
import datetime
import json
import logging
import pathlib
from collections.abc import AsyncIterator

import pytest
import yaml

from determined.common import errors, expconf
from pydet.master.cluster import policies
from pydet.master.cluster.messages import ClusterMessages, parse_duration
from pydet.master.logs.master_log import MasterLog
from pydet.master.logs.retention import DAY, delete_expired_logs, set_trial_days
from pydet.master.queries import usage
from pydet.master.store.db import Database
from tests.unit import rows


@pytest.fixture
async def db(tmp_path: pathlib.Path) -> AsyncIterator[Database]:
    store = Database(tmp_path / "pydet.db")
    await store.open()
    try:
        yield store
    finally:
        await store.close()


# -- the cluster-wide message ---------------------------------------------------------------------


def test_durations_are_go_durations_plus_days_and_weeks() -> None:
    assert parse_duration("90s") == 90
    assert parse_duration("1h30m") == 5400
    assert parse_duration("1.5h") == 5400
    assert parse_duration("5d") == 5 * 86400
    assert parse_duration("2w") == 14 * 86400
    for bad in ("", "5", "h", "3 days", "-1h", "1h 2m"):
        with pytest.raises(errors.InvalidArgument, match="is not a duration"):
            parse_duration(bad)


async def test_a_message_is_shown_between_its_times_and_survives_a_restart(db: Database) -> None:
    messages = ClusterMessages(db)
    await messages.load()
    assert messages.shown() is None and messages.current() is None
    now = 1_900_000_000.0
    m = await messages.set(
        "maintenance at noon", username="admin", start_time=now + 60, duration="1h"
    )
    assert m.end_time == now + 60 + 3600
    assert messages.shown(now) is None  # not yet
    assert messages.current(now) == m  # but set
    assert messages.shown(now + 61) == m
    assert messages.shown(now + 3661) is None
    again = ClusterMessages(db)
    await again.load()
    assert again.current(now) == m
    # A new message ends the old one; clearing ends it now.
    await again.set("upgrade done", username="admin")
    assert again.shown() is not None and again.shown().message == "upgrade done"  # type: ignore[union-attr]
    await again.clear()
    assert again.shown() is None and again.current() is None


async def test_bad_messages_are_refused_naming_the_field(db: Database) -> None:
    messages = ClusterMessages(db)
    with pytest.raises(errors.InvalidArgument, match="message: required"):
        await messages.set("  ", username="admin")
    with pytest.raises(errors.InvalidArgument, match="at most 250 characters; got 251"):
        await messages.set("x" * 251, username="admin")
    with pytest.raises(errors.InvalidArgument, match="one or the other"):
        await messages.set("x", username="admin", end_time=2e9, duration="1h")
    with pytest.raises(errors.InvalidArgument, match="end_time: must be in the future"):
        await messages.set("x", username="admin", start_time=1.0, end_time=2.0)


# -- config policies ------------------------------------------------------------------------------


def test_policies_parse_yaml_or_json_and_refuse_unknown_sections() -> None:
    p = policies.parse(
        "EXPERIMENT",
        "invariant_config: {resources: {priority: 5}, debug: true}\n"
        "constraints: {resources: {max_slots: 4}}\n",
    )
    assert p.to_dict() == {
        "invariant_config": {"resources": {"priority": 5}, "debug": True},
        "constraints": {"resources": {"max_slots": 4}},
    }
    as_json = policies.parse("EXPERIMENT", json.dumps({"constraints": {"priority_limit": 10}}))
    assert as_json.constraints == policies.Constraints(priority_limit=10)
    for text, match in (
        ("constraint: {}", "config_policies.constraint: unknown"),
        ("constraints: {resources: {slots: 2}}", "constraints.resources.slots: unknown"),
        ("constraints: {priority_limit: high}", "constraints.priority_limit: expected a whole"),
        ("invariant_config: {resources: {slots_per_trial: -1}}", "invariant_config: resources"),
        ("invariant_config: {no_such_key: 1}", "invariant_config: no_such_key"),
        ("[1, 2]", "expected a mapping"),
    ):
        with pytest.raises(errors.InvalidArgument, match=match):
            policies.parse("EXPERIMENT", text)
    with pytest.raises(errors.InvalidArgument, match="not supported for NTSC"):
        policies.parse("NTSC", "invariant_config: {debug: true}")
    with pytest.raises(errors.InvalidArgument, match="expected EXPERIMENT or NTSC"):
        policies.workload_type("notebooks")
    assert policies.workload_type("tasks") == "NTSC"


def test_an_invariant_config_may_not_contradict_the_constraints() -> None:
    with pytest.raises(errors.InvalidArgument, match="trying to set the priority limit"):
        policies.parse(
            "EXPERIMENT",
            "invariant_config: {resources: {priority: 5}}\nconstraints: {priority_limit: 10}",
        )
    with pytest.raises(errors.InvalidArgument, match=r"3 slots per trial\. violates constraints"):
        policies.parse(
            "EXPERIMENT",
            "invariant_config: {resources: {slots_per_trial: 3}}\n"
            "constraints: {resources: {max_slots: 2}}",
        )


def test_constraints_refuse_more_slots_and_a_higher_priority() -> None:
    p = policies.parse("EXPERIMENT", "constraints: {priority_limit: 20, resources: {max_slots: 4}}")
    policies.check_slots(p, slots=4, max_slots=None)
    with pytest.raises(errors.InvalidArgument, match=r"resources.slots_per_trial \[5\] exceeds"):
        policies.check_slots(p, slots=5, max_slots=None)
    with pytest.raises(errors.InvalidArgument, match=r"resources.max_slots \[8\] exceeds"):
        policies.check_slots(p, slots=1, max_slots=8)
    # A smaller number runs first: asking for 10 is asking to run before the limit allows.
    policies.check_priority(p, 20, smaller_is_higher=True)
    policies.check_priority(p, None, smaller_is_higher=True)
    with pytest.raises(errors.InvalidArgument, match=r"requested priority \[10\] exceeds limit"):
        policies.check_priority(p, 10, smaller_is_higher=True)


async def test_the_invariant_config_wins_over_the_users_config(db: Database) -> None:
    store = policies.ConfigPolicies(db)
    text = "entrypoint: python3 train.py\nresources: {priority: 50, slots_per_trial: 2}\n"
    assert await store.apply_invariant(text) == text  # no policies: unchanged
    await store.put(
        "EXPERIMENT",
        "invariant_config:\n  resources: {priority: 5}\n  bind_mounts:\n"
        "    - {host_path: /data, container_path: /data}\n",
        username="admin",
    )
    merged = yaml.safe_load(await store.apply_invariant(text))
    assert merged["resources"] == {"priority": 5, "slots_per_trial": 2}
    assert merged["bind_mounts"] == [{"host_path": "/data", "container_path": "/data"}]
    assert merged["entrypoint"] == "python3 train.py"
    assert (await store.get("EXPERIMENT")).to_dict()["invariant_config"]["resources"] == {
        "priority": 5
    }
    assert (await store.get("NTSC")).to_dict() == {}
    await store.delete("EXPERIMENT")
    assert (await store.get("EXPERIMENT")).to_dict() == {}
    expconf.load_yaml(await store.apply_invariant(text))


async def test_a_workspaces_policies_hold_under_the_global_ones(db: Database) -> None:
    store = policies.ConfigPolicies(db)
    await db.execute("INSERT INTO workspaces (id, name, created_at) VALUES (5, 'lab', 0)")
    await store.put(
        "EXPERIMENT",
        "invariant_config: {max_restarts: 1, description: lab}\n"
        "constraints: {priority_limit: 20, resources: {max_slots: 2}}\n",
        username="alice",
        workspace_id=5,
    )
    await store.put(
        "EXPERIMENT",
        "invariant_config: {description: cluster}\nconstraints: {resources: {max_slots: 8}}\n",
        username="admin",
    )
    found = await store.effective("EXPERIMENT", 5)
    assert found.invariant_config == {"description": "cluster", "max_restarts": 1}
    assert found.constraints == policies.Constraints(priority_limit=20, max_slots=8)
    assert (await store.effective("EXPERIMENT", 1)).invariant_config == {"description": "cluster"}
    merged = yaml.safe_load(await store.apply_invariant("description: mine\n", 5))
    assert merged == {"description": "cluster", "max_restarts": 1}
    await store.delete("EXPERIMENT")
    assert (await store.effective("EXPERIMENT", 5)).constraints == policies.Constraints(20, 2)
    with pytest.raises(errors.NotFound, match="workspace 9 not found"):
        await store.get("EXPERIMENT", 9)


# -- the master's own log -------------------------------------------------------------------------


async def test_the_master_log_pages_from_either_end_and_follows() -> None:
    log = MasterLog(capacity=5)
    logger = logging.getLogger("pydet.test.masterlog")
    logger.addHandler(log)
    logger.setLevel(logging.DEBUG)
    try:
        for n in range(7):
            logger.info("line %d", n)
        assert len(log) == 5  # the oldest two are gone
        assert [e.message for e in log.entries(-2)] == [
            "pydet.test.masterlog: line 5",
            "pydet.test.masterlog: line 6",
        ]
        assert [e.id for e in log.entries(0, 2)] == [2, 3]
        assert log.entries(-1)[0].level == "INFO"

        async def first_two_batches() -> list[list[str]]:
            out = []
            async for batch in log.follow(-1):
                out.append([e.message.rsplit(" ", 1)[-1] for e in batch])
                if len(out) == 2:
                    return out
            return out

        following = asyncio.create_task(first_two_batches())
        await asyncio.sleep(0.05)
        logger.warning("line 7")
        assert await asyncio.wait_for(following, 5) == [["6"], ["7"]]
    finally:
        logger.removeHandler(log)


# -- a trial's own log retention ------------------------------------------------------------------


async def test_a_trials_own_retention_wins_over_its_experiments(db: Database) -> None:
    now = 1_800_000_000.0
    await rows.experiment(db, 1)
    for trial_id in (1, 2):
        await rows.trial(db, trial_id, 1)
        await db.execute("UPDATE trials SET end_time = ? WHERE id = ?", (now - 5 * DAY, trial_id))
        await db.execute(
            "INSERT INTO task_logs (trial_id, task_id, allocation_id, timestamp, message)"
            " VALUES (?, ?, 'a', 0, 'x')",
            (trial_id, f"1.{trial_id}"),
        )
    # The experiment has not ended: only a trial with days of its own loses its logs.
    await set_trial_days(db, 1, 2)
    assert await delete_expired_logs(db, now=now, default_days=None) == 1
    await set_trial_days(db, 2, -1)
    assert await delete_expired_logs(db, now=now, default_days=0) == 0
    with pytest.raises(errors.NotFound, match="trial 99 not found"):
        await set_trial_days(db, 99, 1)
    with pytest.raises(errors.InvalidArgument, match=r"-1 \(forever\) to 32767"):
        await set_trial_days(db, 1, 40000)


# -- resource use ---------------------------------------------------------------------------------


async def test_usage_is_split_at_the_edges_of_days_and_months(db: Database) -> None:
    day = datetime.date(2027, 1, 31)
    start = datetime.datetime(2027, 1, 31, 23, 0, tzinfo=datetime.UTC).timestamp()
    await rows.experiment(db, 1)
    await db.execute(
        "UPDATE experiments SET config = ?, username = 'alice' WHERE id = 1",
        (json.dumps({"labels": ["nlp"], "resources": {"resource_pool": "gpu"}}),),
    )
    await rows.trial(db, 1, 1)
    containers = [{"agent_id": "a", "slot_ids": ["0", "1"]}]
    await db.execute(
        "INSERT INTO allocations (id, trial_id, task_id, state, containers, token, start_time,"
        " end_time) VALUES ('1.1.0', 1, '1.1', 'TERMINATED', ?, 't', ?, ?)",
        (json.dumps(containers), start, start + 2 * 3600),
    )
    raw = await usage.allocations(db, start - 10, start + 10)
    assert [(r.username, r.slots, r.kind, r.labels) for r in raw] == [
        ("alice", 2, "TRIAL", ("nlp",))
    ]
    daily = await usage.aggregated(db, day, day + datetime.timedelta(days=1), usage.DAILY, now=0)
    assert [(p.start.isoformat(), p.seconds) for p in daily] == [
        ("2027-01-31", 2 * 3600.0),  # one hour on two slots
        ("2027-02-01", 2 * 3600.0),
    ]
    assert dict(daily[0].by_username) == {"alice": 7200.0}
    assert dict(daily[0].by_experiment_label) == {"nlp": 7200.0}
    assert dict(daily[0].by_resource_pool) == {"gpu": 7200.0}
    monthly = await usage.aggregated(db, day, day, usage.MONTHLY, now=0)
    assert [(p.start.isoformat(), p.seconds) for p in monthly] == [("2027-01-01", 7200.0)]
