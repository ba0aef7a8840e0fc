"""The shared supervisor with real worker processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from determined.launch._supervisor import Worker, supervise


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is as good as gone; it is not ours to reap.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except FileNotFoundError:
        return False


def wait_for_file(path: Path, timeout: float = 10.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        time.sleep(0.02)
    raise AssertionError(f"{path} was never written")


def test_zero_only_when_every_worker_exits_zero() -> None:
    assert supervise([Worker(["true"]), Worker(["sh", "-c", "sleep 0.2"])]) == 0


def test_first_failure_ends_the_others_within_seconds(tmp_path: Path) -> None:
    pidfile = tmp_path / "sleeper.pid"
    sleeper = Worker(["sh", "-c", f"echo $$ > {pidfile}; exec sleep 60"])
    failing = Worker(["sh", "-c", f"while [ ! -s {pidfile} ]; do sleep 0.05; done; exit 3"])
    started = time.monotonic()
    assert supervise([sleeper, failing]) == 3
    assert time.monotonic() - started < 5
    assert not alive(int(pidfile.read_text()))


def test_a_worker_that_ignores_sigterm_is_killed_after_the_grace_period(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    stubborn = Worker(["sh", "-c", f"trap '' TERM; echo 1 > {ready}; while :; do sleep 0.1; done"])
    failing = Worker(["sh", "-c", f"while [ ! -s {ready} ]; do sleep 0.05; done; exit 4"])
    started = time.monotonic()
    assert supervise([stubborn, failing], grace_seconds=1.0) == 4
    assert 0.9 < time.monotonic() - started < 5


def test_what_a_failed_worker_left_in_its_group_is_ended_too(tmp_path: Path) -> None:
    pidfile = tmp_path / "orphan.pid"
    worker = Worker(["sh", "-c", f"sleep 60 & echo $! > {pidfile}; exit 2"])
    assert supervise([worker]) == 2
    pid = int(wait_for_file(pidfile))
    deadline = time.monotonic() + 5
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pid)


def test_a_command_that_cannot_start_fails_like_a_shell() -> None:
    started = time.monotonic()
    assert supervise([Worker(["sleep", "60"]), Worker(["/nonexistent/worker"])]) == 127
    assert time.monotonic() - started < 5


def test_signal_death_is_reported_as_128_plus_signal() -> None:
    assert supervise([Worker(["sh", "-c", "kill -KILL $$"])]) == 137


def test_sigterm_to_the_launcher_reaches_every_worker(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    code = (
        "import sys\n"
        "from determined.launch._supervisor import Worker, supervise\n"
        f"w = ['sh', '-c', 'echo 1 >> {ready}; exec sleep 60']\n"
        "sys.exit(supervise([Worker(w), Worker(w)]))\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and (
        not ready.exists() or len(ready.read_text().split()) < 2
    ):
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 128 + signal.SIGTERM


def test_workers_do_not_outlive_a_launcher_killed_with_sigkill(tmp_path: Path) -> None:
    pidfile = tmp_path / "worker.pid"
    code = (
        "from determined.launch._supervisor import Worker, supervise\n"
        f"supervise([Worker(['sh', '-c', 'echo $$ > {pidfile}; exec sleep 60'])])\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code])
    pid = int(wait_for_file(pidfile))
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 5
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pid)
