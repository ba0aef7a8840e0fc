from __future__ import annotations

import pytest

from pydet.master.tasks.task_spec import shm_bytes


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (None, 0),
        (1024, 1024),
        ("4G", 4 * 2**30),
        ("512M", 512 * 2**20),
        ("4GiB", 4 * 2**30),
        ("1.5g", int(1.5 * 2**30)),
        ("100", 100),
    ],
)
def test_shm_size_is_sent_to_agents_in_bytes(given: int | str | None, expected: int) -> None:
    assert shm_bytes(given) == expected
