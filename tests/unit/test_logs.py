from __future__ import annotations

import pytest

from pydet.master.logs.log_store import parse_line


@pytest.mark.parametrize(
    ("raw", "rank", "level", "message"),
    [
        ("[rank=3] INFO: [42] root: hi", 3, "INFO", "INFO: [42] root: hi"),
        ("plain line", None, "INFO", "plain line"),
        ("WARNING: careful", None, "WARNING", "WARNING: careful"),
        ("[rank=0] ERROR: boom", 0, "ERROR", "ERROR: boom"),
        ("[rank=x] not a rank", None, "INFO", "[rank=x] not a rank"),
    ],
)
def test_rank_prefix_and_level_are_parsed(
    raw: str, rank: int | None, level: str, message: str
) -> None:
    assert parse_line(raw) == (rank, level, message)
