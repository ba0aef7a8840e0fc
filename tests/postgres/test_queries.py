"""The store's query tests (tests/unit) on both dialects: their ``store`` is this
directory's, parametrized over SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from pydet.master.store.db import Database
from tests.unit.test_experiment_store import *  # noqa: F403
from tests.unit.test_queries_checkpoints import *  # noqa: F403
from tests.unit.test_queries_experiments import *  # noqa: F403
from tests.unit.test_queries_logs import *  # noqa: F403
from tests.unit.test_queries_metrics import *  # noqa: F403
from tests.unit.test_queries_metrics import two_trials
from tests.unit.test_templates import *  # noqa: F403


@pytest.fixture
async def db(store: Database) -> Database:
    """test_queries_metrics's store, on each dialect."""
    await two_trials(store)
    return store
