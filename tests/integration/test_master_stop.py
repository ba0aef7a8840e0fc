"""A master asked to stop stops: at once when nothing holds it, and by its deadline when
something does, saying what held it."""

from __future__ import annotations

import pathlib
import signal
import subprocess
import sys
import time

from tests.cluster import wait_until

# A real master whose stop never finishes: Master.stop is made to do nothing, so only the
# deadline can end it. The times are shortened to keep the test quick.
STUCK = """
import sys

from pydet.master import __main__ as det_master
from pydet.master.server import Master

det_master.SLOW_STOP_SECONDS = 0.5
det_master.STOP_DEADLINE_SECONDS = 2.0
Master.stop = lambda self: None
det_master.main(sys.argv[1:])
"""


def _start(
    tmp_path: pathlib.Path, program: list[str]
) -> tuple[subprocess.Popen[bytes], pathlib.Path]:
    """Start ``python PROGRAM`` with a master's arguments; it and its log, once it listens."""
    log = tmp_path / "master.log"
    argv = [sys.executable, *program]
    argv += ["--host", "127.0.0.1", "--port", "0", "--data-dir", str(tmp_path / "data")]
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    wait_until(lambda: "listening on" in log.read_text(), 30, "the master to listen")
    return proc, log


def test_a_master_stops_at_once_on_sigterm(tmp_path: pathlib.Path) -> None:
    proc, log = _start(tmp_path, ["-m", "pydet.master"])
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 0
    assert time.monotonic() - started < 5
    text = log.read_text()
    assert "master stopped" in text
    assert "still stopping" not in text


def test_a_stop_that_hangs_logs_its_tasks_and_ends_at_the_deadline(
    tmp_path: pathlib.Path,
) -> None:
    proc, log = _start(tmp_path, ["-c", STUCK])
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 1
    took = time.monotonic() - started
    assert 2.0 <= took < 10, took
    text = log.read_text()
    # What held it, first as the event loop's tasks, then as the threads' stacks.
    assert "still stopping after 0.5 s" in text
    assert "TaskManager.run" in text
    assert "Timeout (0:00:02)!" in text
    assert "master stopped" not in text
