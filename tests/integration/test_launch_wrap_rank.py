"""wrap_rank as a real process: prefixes, streams, exit codes and signals."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

WRAP_RANK = [sys.executable, "-m", "determined.launch.wrap_rank"]


def test_stdout_and_stderr_lines_are_prefixed_on_their_own_stream() -> None:
    script = "import sys; print('out'); print('err', file=sys.stderr); print('more'); sys.exit(3)"
    p = subprocess.run([*WRAP_RANK, "2", "--", sys.executable, "-c", script], capture_output=True)
    assert p.returncode == 3
    assert p.stdout == b"[rank=2] out\n[rank=2] more\n"
    assert p.stderr == b"[rank=2] err\n"


def test_rank_comes_from_the_named_environment_variable() -> None:
    env = {**os.environ, "RANK": "7"}
    p = subprocess.run([*WRAP_RANK, "RANK", "echo", "hi"], capture_output=True, env=env)
    assert (p.returncode, p.stdout) == (0, b"[rank=7] hi\n")


def test_binary_output_and_unterminated_lines_survive() -> None:
    p = subprocess.run([*WRAP_RANK, "0", "printf", r"\377a\nlast"], capture_output=True)
    assert p.returncode == 0
    assert p.stdout == "[rank=0] \ufffda\n[rank=0] last\n".encode()


def test_a_missing_rank_variable_is_a_usage_error() -> None:
    env = {k: v for k, v in os.environ.items() if k != "RANK"}
    p = subprocess.run([*WRAP_RANK, "RANK", "echo"], capture_output=True, env=env, text=True)
    assert p.returncode == 2
    assert "no environment variable RANK is set" in p.stderr


def test_a_command_that_cannot_start_exits_127() -> None:
    p = subprocess.run([*WRAP_RANK, "0", "/nonexistent/cmd"], capture_output=True, text=True)
    assert p.returncode == 127
    assert "cannot run /nonexistent/cmd" in p.stderr


def test_death_by_signal_is_reported_as_128_plus_signal() -> None:
    p = subprocess.run([*WRAP_RANK, "0", "sh", "-c", "kill -9 $$"], capture_output=True)
    assert p.returncode == 128 + 9


def test_sigterm_is_forwarded_and_the_last_lines_still_arrive() -> None:
    script = (
        "import signal, sys, time\n"
        "def bye(*_):\n"
        "    print('terminated', flush=True); sys.exit(5)\n"
        "signal.signal(signal.SIGTERM, bye)\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    proc = subprocess.Popen([*WRAP_RANK, "1", sys.executable, "-c", script], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    assert proc.stdout.readline() == b"[rank=1] ready\n"
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    rest = proc.stdout.read()
    assert proc.wait(timeout=10) == 5
    assert rest == b"[rank=1] terminated\n"
    assert time.monotonic() - started < 5


def test_a_signal_to_the_whole_group_reaches_the_command_once() -> None:
    # torchrun ends a worker by signalling its process group: wrap_rank and, without care,
    # CMD too, whose SIGTERM handler would then run twice.
    script = (
        "import signal, sys, time\n"
        "hits = []\n"
        "signal.signal(signal.SIGTERM, lambda *_: hits.append(1))\n"
        "print('ready', flush=True)\n"
        "while not hits: time.sleep(0.05)\n"
        "time.sleep(0.5)\n"
        "print('hits', len(hits), flush=True)\n"
    )
    proc = subprocess.Popen(
        [*WRAP_RANK, "0", sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == b"[rank=0] ready\n"
    os.killpg(proc.pid, signal.SIGTERM)
    assert proc.stdout.read() == b"[rank=0] hits 1\n"
    assert proc.wait(timeout=10) == 0


def test_the_command_does_not_outlive_a_killed_launcher(tmp_path: Path) -> None:
    pidfile = tmp_path / "worker.pid"
    worker = f"import os, time; open({str(pidfile)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    launcher = (
        "import subprocess, sys, time\n"
        f"subprocess.Popen({[*WRAP_RANK, '0', sys.executable, '-c', worker]!r})\n"
        "time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", launcher])
    deadline = time.monotonic() + 10
    while not (pidfile.exists() and pidfile.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    worker_pid = int(pidfile.read_text())
    proc.kill()  # SIGKILL: the launcher gets no chance to end its workers
    proc.wait()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(worker_pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    raise AssertionError("the worker outlived its launcher")
