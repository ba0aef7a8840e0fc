"""A master on PostgreSQL outlives a restart of its database: requests during the outage get
one clear error naming the database, and the master serves again once it is back. A master
started while its database is down says where it looked and exits."""

from __future__ import annotations

import asyncio
import pathlib
import subprocess
import sys
from collections.abc import Iterator

import pytest

from determined.common import errors
from pydet.master.config import DbConfig
from pydet.master.store.db import Database
from tests.cluster import EXAMPLES, Cluster, free_port, running, wait_until
from tests.postgres.conftest import SCRIPTS, fresh_database


def db_settings(db: DbConfig, *, port: int | None = None) -> str:
    return (
        f"db:\n  type: postgres\n  host: {db.host}\n  port: {port or db.port}\n"
        f"  name: {db.name}\n  user: {db.user}\n  password_file: {db.password_file}\n"
    )


def restart(where: pathlib.Path) -> None:
    subprocess.run([SCRIPTS / "stop.sh", where], check=True, timeout=60)
    subprocess.run([SCRIPTS / "start.sh", where], check=True, timeout=120, capture_output=True)


@pytest.fixture
def database(postgres: tuple[DbConfig, pathlib.Path]) -> DbConfig:
    return asyncio.run(fresh_database(postgres))


@pytest.fixture
def cluster(tmp_path: pathlib.Path, database: DbConfig) -> Iterator[Cluster]:
    def start(c: Cluster) -> None:
        c.start_master()
        c.start_agent("agent-0", 1)

    yield from running(Cluster(tmp_path, master_config=db_settings(database)), start)


def test_a_master_serves_again_after_its_postgres_restarts(
    cluster: Cluster, database: DbConfig, postgres: tuple[DbConfig, pathlib.Path]
) -> None:
    _, where = postgres
    exp_id = cluster.create(EXAMPLES / "minimal" / "const.yaml", EXAMPLES / "minimal", "--paused")
    subprocess.run([SCRIPTS / "stop.sh", where], check=True, timeout=60)
    try:
        down = cluster.det("experiment", "list", check=False)
        assert down.returncode != 0
        # One line, naming the database and where it is; no traceback.
        assert down.stderr.count("\n") == 1, down.stderr
        assert f"PostgreSQL database {database.name} at {database.host}:{database.port}" in (
            down.stderr
        )
        assert "Traceback" not in down.stderr
        assert cluster.master is not None and cluster.master.poll() is None
    finally:
        subprocess.run([SCRIPTS / "start.sh", where], check=True, timeout=120, capture_output=True)

    def lists_it() -> bool:
        proc = cluster.det("experiment", "list", "--json", check=False)
        return proc.returncode == 0 and f'"id": {exp_id}' in proc.stdout

    wait_until(lists_it, 30, "the master to serve again", interval=0.5)
    # And runs work again: the paused experiment, activated, runs to the end on the agent
    # that stayed connected through the outage.
    cluster.det("experiment", "activate", str(exp_id))
    assert cluster.wait_state(exp_id, "COMPLETED", "ERROR", "CANCELED") == "COMPLETED"
    assert cluster.master is not None and cluster.master.poll() is None


def test_a_master_whose_postgres_is_down_says_where_and_exits(
    tmp_path: pathlib.Path, database: DbConfig
) -> None:
    port = free_port()  # nothing listens there
    config = tmp_path / "master.yaml"
    config.write_text(db_settings(database, port=port))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pydet.master",
            "--port",
            str(free_port()),
            "--data-dir",
            str(tmp_path / "master"),
            "--config-file",
            str(config),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode != 0
    lines = [line for line in proc.stderr.splitlines() if line.startswith("det-master:")]
    assert len(lines) == 1, proc.stderr
    assert f"{database.host}:{port}" in lines[0] and database.name in lines[0]
    assert "Traceback" not in proc.stderr


async def test_a_unit_cut_short_by_a_restart_fails_whole_and_the_store_goes_on(
    tmp_path: pathlib.Path, database: DbConfig, postgres: tuple[DbConfig, pathlib.Path]
) -> None:
    db = Database(tmp_path / "pydet.db", database)
    await db.open()
    try:
        with pytest.raises(errors.Unavailable, match=f"PostgreSQL database {database.name} at"):
            async with db.atomic():
                await db.execute("INSERT INTO cluster (key, value) VALUES ('a', '1')")
                await asyncio.to_thread(restart, postgres[1])
                # Not run on a new connection outside the transaction.
                await db.execute("INSERT INTO cluster (key, value) VALUES ('b', '2')")
        assert await db.fetch_all("SELECT key FROM cluster WHERE key IN ('a', 'b')") == []
        await db.execute("INSERT INTO cluster (key, value) VALUES ('c', '3')")
        row = await db.fetch_one("SELECT value FROM cluster WHERE key = 'c'")
        assert row is not None and row["value"] == "3"
    finally:
        await db.close()
