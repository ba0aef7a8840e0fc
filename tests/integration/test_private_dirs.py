"""The master's data directory and an agent's work directory are their user's alone,
whatever the umask they were started under: 0700, the files in them 0600; directories
left open by an earlier release are tightened at start, with a line in the log."""

from __future__ import annotations

import os
import pathlib
import stat
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.cluster import Cluster, running, wait_until


def mode(path: pathlib.Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def open_umask() -> Iterator[None]:
    """The usual umask (022), which the processes the test starts inherit."""
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def test_a_new_master_keeps_its_store_and_tokens_to_itself(
    tmp_path: pathlib.Path, open_umask: None
) -> None:
    c = Cluster(tmp_path)
    for _ in running(c, lambda c: (c.start_master(), c.start_agent("agent-0", 1))):
        data = tmp_path / "master"
        assert mode(data) == 0o700
        store = ("pydet.db", "pydet.db-wal") if c.postgres is None else ()
        for name in (*store, "agent-token", "admin-password"):
            assert mode(data / name) == 0o600, name
        work = tmp_path / "agent-0"  # the agent's --work-dir (tests/cluster.py)
        wait_until(work.is_dir, 20, "the work dir")
        assert mode(work) == 0o700


def test_a_data_directory_left_open_is_tightened_at_start(
    tmp_path: pathlib.Path, open_umask: None
) -> None:
    data = tmp_path / "master"
    data.mkdir(mode=0o755)
    (data / "notes.txt").write_text("an old file")
    (data / "notes.txt").chmod(0o644)
    c = Cluster(tmp_path)
    for _ in running(c, lambda c: c.start_master()):
        assert mode(data) == 0o700
        assert mode(data / "notes.txt") == 0o600
        log = (tmp_path / "master.log").read_text()
        assert "made the data directory's" in log and "notes.txt" in log


def test_an_agent_refuses_a_work_directory_everybody_shares(tmp_path: pathlib.Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    proc = subprocess.run(
        [sys.executable, "-m", "pydet.agent", "--master", "127.0.0.1:1", "--work-dir", str(shared)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "--work-dir" in proc.stderr and "shared by every user" in proc.stderr
    assert mode(shared) == 0o1777  # left as it was
