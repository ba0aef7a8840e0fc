"""What the store's two backends and its ``Database`` share: the database's config, the
row type and a batch's statement."""

from __future__ import annotations

import pathlib
import sqlite3
from dataclasses import dataclass
from typing import Any

# sqlite3's rows, or asyncpg's Records on PostgreSQL: both are read by column name (and by
# position), iterate over their values and give their names from keys().
Row = sqlite3.Row

# One statement of a batch: SQL, its parameters (a sequence of rows for executemany) and
# whether it is an executemany.
Statement = tuple[str, Any, bool]


@dataclass(frozen=True)
class DbConfig:
    """The store: sqlite (embedded, <data_dir>/pydet.db) or a PostgreSQL server."""

    type: str = "sqlite"
    host: str = "127.0.0.1"
    port: int = 5432
    name: str = "pydet"
    user: str = "pydet"
    # The password, in a file (never in the config itself); none: the server's other means.
    password_file: pathlib.Path | None = None
