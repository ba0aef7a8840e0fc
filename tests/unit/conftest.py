from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from pydet.master.store.db import Database


@pytest.fixture(autouse=True)
def _own_cli_config(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """CLI code under test never reads or writes the real user's cached sessions."""
    config = tmp_path_factory.mktemp("xdg-config")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    for name in ("DET_USER", "DET_PASS", "DET_NEW_PASSWORD"):
        monkeypatch.delenv(name, raising=False)
    return config


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Database]:
    """An empty store, migrated to the latest schema."""
    db = Database(tmp_path / "pydet.db")
    await db.open()
    yield db
    await db.close()
