"""The processes of a `det deploy local` cluster and the state file that remembers them.

The master and agents outlive the `det` command that started them, so their pids go to
`cluster.json` in the data directory, each with the exact argv it was started with. A pid is
only believed to be ours while /proc shows that argv: after a reboot the numbers are reused,
and `cluster-down` must never signal somebody else's process.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

STATE_FILE = "cluster.json"


@dataclasses.dataclass(frozen=True)
class Proc:
    """One daemon of the local cluster."""

    name: str  # the master's name (deploy_flags.master_name) or the agent id
    pid: int
    argv: list[str]
    log: str

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Proc:
        return cls(name=str(d["name"]), pid=int(d["pid"]), argv=list(d["argv"]), log=str(d["log"]))


@dataclasses.dataclass(frozen=True)
class ClusterState:
    port: int
    # None after `det deploy local master-down` (agents may still run, waiting for it).
    master: Proc | None
    agents: list[Proc]

    @property
    def procs(self) -> list[Proc]:
        return [*([self.master] if self.master is not None else []), *self.agents]


def write_state(data_dir: Path, state: ClusterState) -> None:
    doc = {
        "master_port": state.port,
        "master": None if state.master is None else state.master.to_dict(),
        "agents": [a.to_dict() for a in state.agents],
    }
    tmp = data_dir / (STATE_FILE + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2) + "\n")
    tmp.replace(data_dir / STATE_FILE)


def read_state(data_dir: Path) -> ClusterState | None:
    """The recorded cluster; None when there is none (or the file is unreadable junk)."""
    try:
        doc = json.loads((data_dir / STATE_FILE).read_text())
        return ClusterState(
            port=int(doc["master_port"]),
            master=None if doc["master"] is None else Proc.from_dict(doc["master"]),
            agents=[Proc.from_dict(a) for a in doc["agents"]],
        )
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):
        # A half-written or hand-edited file: treat as no cluster; cluster-up overwrites it.
        return None


def remove_state(data_dir: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        (data_dir / STATE_FILE).unlink()


def start(name: str, argv: Sequence[str], log: Path, cwd: Path) -> Proc:
    """Start a detached daemon: its own session (so Ctrl-C here does not reach it)."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    with open(log, "ab") as out:
        popen = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )
    return Proc(name=name, pid=popen.pid, argv=list(argv), log=str(log))


def alive(proc: Proc) -> bool:
    """Whether `proc` still runs and is still the process we started."""
    _reap(proc.pid)
    cmdline = Path(f"/proc/{proc.pid}/cmdline")
    if Path("/proc/self/cmdline").exists():
        try:
            found = cmdline.read_bytes().split(b"\0")
        except OSError:
            return False
        return [a.decode(errors="replace") for a in found if a] == proc.argv
    try:
        os.kill(proc.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False  # someone else's process now holds the number
    return True


def _reap(pid: int) -> None:
    """Collect an exited child of this process (else it lingers as a zombie that looks alive)."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def exit_code(proc: Proc) -> int | None:
    """The exit status of a child of this process that has ended, else None."""
    try:
        pid, status = os.waitpid(proc.pid, os.WNOHANG)
    except ChildProcessError:
        return None
    return os.waitstatus_to_exitcode(status) if pid else None


def stop(procs: Sequence[Proc], *, grace: float = 15.0) -> list[Proc]:
    """SIGTERM, wait up to `grace` seconds, SIGKILL what is left; returns the killed ones."""
    running = [p for p in procs if alive(p)]
    for p in running:
        with contextlib.suppress(ProcessLookupError):
            os.kill(p.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while running and time.monotonic() < deadline:
        time.sleep(0.1)
        running = [p for p in running if alive(p)]
    for p in running:
        # The daemon leads its own process group: take its children down with it.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(p.pid, signal.SIGKILL)
    for p in running:
        _reap(p.pid)
    return running


def log_tail(path: str, lines: int = 20) -> str:
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return "(no log)"
    tail = text.splitlines()[-lines:]
    return "\n".join("  " + line for line in tail) if tail else "  (empty log)"
