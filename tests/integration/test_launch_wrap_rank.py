"""wrap_rank as a real process: prefixes, streams, exit codes and signals."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

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
