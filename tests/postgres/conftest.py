"""The store's tests against PostgreSQL as well as SQLite.

A throw-away PostgreSQL (Debian's package, scripts/postgres/) is started once for the
session, only with POSTGRES_TESTS=1 (CI's postgres step): otherwise these tests are skipped
and say why. Every test gets a database of its own.
"""

from __future__ import annotations

import itertools
import os
import pathlib
import shutil
import subprocess
import tempfile
from collections.abc import AsyncIterator, Iterator

import pytest
import yaml

from pydet.master.config import DbConfig
from pydet.master.store.db import Database

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts" / "postgres"
ENABLED = os.environ.get("POSTGRES_TESTS") == "1"
_databases = itertools.count(1)


@pytest.hookimpl(tryfirst=True)  # marked before -m selects
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = pathlib.Path(__file__).parent
    for item in items:
        if here in pathlib.Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.postgres)
            if not ENABLED:
                item.add_marker(
                    pytest.mark.skip(reason="PostgreSQL tests run with POSTGRES_TESTS=1")
                )


@pytest.fixture(scope="session")
def postgres() -> Iterator[tuple[DbConfig, pathlib.Path]]:
    """The server: its pydet database's settings, and its directory (the admin's socket)."""
    if not ENABLED:
        pytest.skip("PostgreSQL tests run with POSTGRES_TESTS=1")
    subprocess.run([SCRIPTS / "install.sh"], check=True, timeout=900, capture_output=True)
    # Not under pytest's tmp_path: the postgres user must reach it.
    where = pathlib.Path(tempfile.mkdtemp(prefix="pydet-postgres-"))
    where.chmod(0o755)
    try:
        out = subprocess.run(
            [SCRIPTS / "start.sh", where], check=True, timeout=120, capture_output=True, text=True
        ).stdout
        raw = yaml.safe_load(out)["db"]
        cfg = DbConfig(
            type="postgres",
            host=raw["host"],
            port=int(raw["port"]),
            name=raw["name"],
            user=raw["user"],
            password_file=pathlib.Path(raw["password_file"]),
        )
        yield cfg, where
    finally:
        subprocess.run([SCRIPTS / "stop.sh", where], timeout=60, check=False)
        shutil.rmtree(where, ignore_errors=True)


async def fresh_database(server: tuple[DbConfig, pathlib.Path]) -> DbConfig:
    """A new, empty database on the server, owned by the store's user."""
    import asyncpg

    cfg, where = server
    name = f"test_{os.getpid()}_{next(_databases)}"
    admin = await asyncpg.connect(
        host=str(where), port=cfg.port, user="postgres", database="postgres", timeout=30
    )
    try:
        await admin.execute(f"CREATE DATABASE {name} OWNER {cfg.user}")
    finally:
        await admin.close()
    return DbConfig(
        type="postgres",
        host=cfg.host,
        port=cfg.port,
        name=name,
        user=cfg.user,
        password_file=cfg.password_file,
    )


@pytest.fixture(params=["sqlite", "postgres"])
def dialect(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def new_store(
    dialect: str, tmp_path: pathlib.Path, request: pytest.FixtureRequest
) -> AsyncIterator[Database]:
    """An empty store, not yet opened, on each dialect."""
    if dialect == "sqlite":
        yield Database(tmp_path / "pydet.db")
        return
    server = request.getfixturevalue("postgres")
    yield Database(tmp_path / "pydet.db", await fresh_database(server))


@pytest.fixture
async def store(new_store: Database) -> AsyncIterator[Database]:
    """An empty store, migrated to the latest schema, on each dialect."""
    await new_store.open()
    yield new_store
    await new_store.close()
