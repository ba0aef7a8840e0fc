"""A real master whose store is PostgreSQL: an experiment runs to COMPLETED, and the master
restarted on the same database still knows it."""

from __future__ import annotations

import asyncio
import pathlib
from collections.abc import Iterator

import pytest

from pydet.master.config import DbConfig
from tests.cluster import EXAMPLES, Cluster, running
from tests.postgres.conftest import fresh_database


@pytest.fixture
def cluster(tmp_path: pathlib.Path, postgres: tuple[DbConfig, pathlib.Path]) -> Iterator[Cluster]:
    db = asyncio.run(fresh_database(postgres))
    config = (
        f"db:\n  type: postgres\n  host: {db.host}\n  port: {db.port}\n  name: {db.name}\n"
        f"  user: {db.user}\n  password_file: {db.password_file}\n"
    )

    def start(c: Cluster) -> None:
        c.start_master()
        c.start_agent("agent-0", 1)

    yield from running(Cluster(tmp_path, master_config=config), start)


def test_an_experiment_completes_on_a_master_with_postgres(cluster: Cluster) -> None:
    exp_id = cluster.create(EXAMPLES / "minimal" / "const.yaml", EXAMPLES / "minimal")
    assert cluster.wait_state(exp_id, "COMPLETED", "ERROR", "CANCELED") == "COMPLETED"
    trials = cluster.trials(exp_id)
    assert [t["state"] for t in trials] == ["COMPLETED"]
    logs = cluster.logs(trials[0]["id"])
    assert "step 5/5" in logs and "done" in logs
    # Nothing of it was in SQLite.
    assert not (cluster.root / "master" / "pydet.db").exists()

    cluster.stop_master()
    cluster.start_master()
    assert cluster.state(exp_id) == "COMPLETED"
    assert [t["state"] for t in cluster.trials(exp_id)] == ["COMPLETED"]
