"""A full disk under the master's store: the master goes on, refuses writes with
RESOURCE_EXHAUSTED naming the path, says so once in its log, and writes again as soon as
there is space; a trial reporting through it loses nothing.

The data directory is a small tmpfs the test mounts (root only), filled to the last few
hundred kilobytes by a file that the test removes to give the space back.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
from collections.abc import Iterator

import pytest

from tests.cluster import Cluster, running, wait_until
from tests.integration.test_experiment_life import make_context

pytestmark = pytest.mark.slow

STEPS = 2000

TRAIN = f"""
import time
import determined as det

with det.core.init() as core_context:
    for i in range(1, {STEPS} + 1):
        core_context.train.report_training_metrics(steps_completed=i, metrics={{"loss": 1 / i}})
        print("step", i, "of the run", "." * 100, flush=True)
        time.sleep(0.002)
"""

CONFIG = """
entrypoint: python3 train.py
searcher: {name: single, metric: loss, max_length: 1}
max_restarts: 0
"""


@pytest.fixture
def small_disk(tmp_path: pathlib.Path) -> Iterator[pathlib.Path]:
    """A 16 MB tmpfs where the master keeps its data directory."""
    data = tmp_path / "master"
    data.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=16m,mode=0700", "tmpfs", str(data)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield data
    finally:
        subprocess.run(["umount", "--lazy", str(data)], check=False)


def fill(data: pathlib.Path, leave: int) -> pathlib.Path:
    st = os.statvfs(data)
    filler = data / "filler"
    filler.write_bytes(b"\0" * max(0, st.f_bavail * st.f_frsize - leave))
    return filler


def test_a_full_disk_refuses_writes_clearly_and_loses_nothing_once_there_is_space(
    tmp_path: pathlib.Path, small_disk: pathlib.Path
) -> None:
    master_log = tmp_path / "master.log"
    full = f"the master's disk is full at {small_disk}"

    def said_full() -> bool:
        return full in master_log.read_text()

    c = Cluster(tmp_path)
    for _ in running(c, lambda c: (c.start_master(), c.start_agent("agent-0", 1))):
        cfg, ctx = make_context(tmp_path, TRAIN, CONFIG)
        filler = fill(small_disk, leave=400_000)
        exp_id = c.create(cfg, ctx)
        wait_until(said_full, 60, "the master to find its disk full")

        # A write the master cannot make: refused with one line naming the path.
        big = tmp_path / "big"
        big.mkdir()
        (big / "train.py").write_text("print('never runs')\n")
        (big / "weights.bin").write_bytes(os.urandom(2_000_000))
        refused = c.det("experiment", "create", str(cfg), str(big), check=False)
        assert refused.returncode != 0
        assert full in refused.stderr and "Traceback" not in refused.stderr
        # Reads still work, and the master is alive and said it once.
        assert c.det("experiment", "list").returncode == 0
        assert c.master is not None and c.master.poll() is None
        assert master_log.read_text().count(full) == 1
        # Every client's banner (the WebUI's, through the master's info) says so too.
        banner = c.get("/api/v1/master")["clusterMessage"]
        assert banner is not None and f"disk is full at {small_disk}" in banner["message"]
        assert banner["startTime"].endswith("Z")  # an RFC 3339 Timestamp, not epoch seconds

        filler.unlink()
        assert c.wait_state(exp_id, "COMPLETED", "ERROR", timeout=180) == "COMPLETED"
        assert c.get("/api/v1/master").get("clusterMessage") is None
        assert "has space again: writes resume" in master_log.read_text()
        (trial,) = c.trials(exp_id)
        # Every report and every line the trial wrote while the disk was full was kept.
        ((reports,),) = c.sql("SELECT COUNT(*) FROM metrics WHERE trial_id = ?", (trial["id"],))
        assert reports == STEPS
        steps = c.sql(
            "SELECT COUNT(*) FROM task_logs WHERE trial_id = ? AND message LIKE 'step %'",
            (trial["id"],),
        )
        assert steps == [(STEPS,)]
