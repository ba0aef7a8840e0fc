"""README's "Deploying on many machines", read as a runbook: its blocks, where each runs.

Every fenced block of the section says where it runs on its first line, the way an admin
reads it:

    # on every node                     install (bash)
    # on the head node                  commands (bash)
    # on each GPU node                  commands (bash)
    # on ..., as a service              one long-running command (bash)
    # /etc/pydet/master.yaml on the head node     a file to write (yaml)

Blocks under the subsection "With the Docker image" are the Docker way. A block that says
anything else, or a fence of another language, is an error: the tests would not know
where to run it. ``Runbook`` runs blocks as an admin would, with the only differences
listed in ``PATHS`` (where README's paths are, per node or shared), ``COPIES`` (the copy
README says to make by hand) and ``admin_environment``; tests/multihost/ and tests/docker/
each add their own table.
"""

from __future__ import annotations

import functools
import os
import pathlib
import re
import shlex
import shutil
import signal
import subprocess
import sys
import sysconfig
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tests.cluster import ROOT, wait_until

if TYPE_CHECKING:
    from tests.netns import Host

README = ROOT / "README.md"
TITLE = "Deploying on many machines"
DOCKER_SUBSECTION = "With the Docker image"
CHECK_SUBSECTION = "Check"

EVERY_NODE = "every node"
HEAD = "the head node"
GPU = "each GPU node"
_WHERE = re.compile(r"^# on (every node|the head node|each GPU node)(, as a service)?$")
_FILE = re.compile(r"^# (/\S+) on (the head node)$")


@dataclass(frozen=True)
class Block:
    line: int  # where its fence opens in README.md, for messages
    where: str  # EVERY_NODE, HEAD or GPU
    body: str  # without the first line
    service: bool = False  # one command that runs until stopped
    file: str | None = None  # a file to write with ``body``, rather than commands
    subsection: str = ""  # the ### heading it is under

    @property
    def docker(self) -> bool:
        """Whether it is the Docker way (under "With the Docker image")."""
        return self.subsection == DOCKER_SUBSECTION

    def commands(self) -> list[str]:
        """The logical command lines: continuations joined, comments dropped."""
        joined = re.sub(r"\\\n\s*", "", self.body)
        return [c for c in (line.strip() for line in joined.splitlines()) if c and c[0] != "#"]

    def __str__(self) -> str:
        return f"README.md line {self.line} ({self.where}{', service' if self.service else ''})"


def blocks(text: str | None = None) -> list[Block]:
    """The section's blocks in order; an AssertionError names any the tests cannot place."""
    lines = (README.read_text() if text is None else text).splitlines()
    start = lines.index(f"## {TITLE}")
    found: list[Block] = []
    subsection = ""
    i = start + 1
    while i < len(lines) and not lines[i].startswith("## "):
        line = lines[i]
        if line.startswith("### "):
            subsection = line[4:]
        if not line.startswith("```"):
            i += 1
            continue
        lang, fence = line[3:].strip(), i + 1
        end = lines.index("```", i + 1)
        body = lines[i + 1 : end]
        i = end + 1
        first = body[0] if body else ""
        if lang == "bash" and (m := _WHERE.match(first)):
            block = Block(fence, m.group(1), "\n".join(body[1:]) + "\n", bool(m.group(2)))
            if block.service and len(block.commands()) != 1:
                raise AssertionError(f"{block}: a service block must hold one command")
        elif lang == "yaml" and (m := _FILE.match(first)):
            block = Block(fence, m.group(2), "\n".join(body[1:]) + "\n", file=m.group(1))
        else:
            raise AssertionError(
                f"README.md line {fence}: a ```{lang} block whose first line is {first!r}: "
                "the deployment tests do not know where to run it (see tests/deploy_readme.py)"
            )
        found.append(
            Block(block.line, block.where, block.body, block.service, block.file, subsection)
        )
    return found


def section_text() -> str:
    text = README.read_text()
    start = text.index(f"## {TITLE}")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else None]


def substitute(text: str, table: Mapping[str, str]) -> str:
    """``text`` with each key of ``table`` replaced in one pass, as whole names: a key is
    not replaced inside a longer name or path component."""
    keys = "|".join(re.escape(k) for k in sorted(table, key=len, reverse=True))
    return re.sub(rf"(?<![\w.-])(?:{keys})(?![\w.-])", lambda m: table[m.group(0)], text)


def admin_environment(home: pathlib.Path) -> dict[str, str]:
    """The environment of an admin's root shell on a node: nothing of this test run's
    (no PYTHONPATH, no virtual environment, no DET_*), only how this machine reaches PyPI."""
    # python3 first on PATH: the one this test runs on (a Python recent enough, README says).
    python = sysconfig.get_config_var("BINDIR")
    env = {
        "PATH": f"{python}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": str(home),
        "LANG": "C.UTF-8",
    }
    for key, value in os.environ.items():
        if key.startswith("PIP_") or key.lower().endswith("_proxy") or key == "SSL_CERT_FILE":
            env[key] = value
    return env


# Not copied to build a wheel: environments, caches, earlier builds (a stale build/lib would
# put deleted modules into the wheel).
_NOT_SOURCES = shutil.ignore_patterns(
    ".git", ".venv", "node_modules", "build", "dist", "*.egg-info", "__pycache__", ".*_cache"
)


def build_wheel(dest: pathlib.Path) -> pathlib.Path:
    """This checkout as a wheel in ``dest`` (what `python -m build --wheel` makes), built
    from a copy so that the checkout stays as it is, but for the WebUI's build that the
    wheel carries (made when missing or stale, as README's "Install from a wheel" says)."""
    webui = subprocess.run(
        [str(ROOT / "scripts" / "webui.sh"), "build"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert webui.returncode == 0, webui.stdout[-2000:] + webui.stderr[-3000:]
    source = dest / "source"
    shutil.copytree(ROOT, source, symlinks=True, ignore=_NOT_SOURCES)
    argv = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
    proc = subprocess.run(
        [*argv, "-q", "-w", str(dest), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=source,
    )
    assert proc.returncode == 0, proc.stderr
    shutil.rmtree(source)
    (wheel,) = dest.glob("pydet-*.whl")
    return wheel


def container_names(block: Block) -> list[tuple[str, str]]:
    """The ``--name`` of each ``docker run`` in ``block``, with the program it runs (one of
    ``READY``): what to wait for, and what to remove afterwards."""
    found = []
    for command in block.commands():
        argv = shlex.split(command)
        if argv[:2] == ["docker", "run"] and "--name" in argv:
            programs = [a for a in argv if a in READY]
            assert len(programs) == 1, f"{block}: which of {', '.join(READY)} does it run?"
            found.append((argv[argv.index("--name") + 1], programs[0]))
    return found


# README path -> whether every node has its own ("node") or all share one ("shared").
PATHS = {
    "/opt/pydet": "shared",  # installed once: the hosts share this machine's disk
    "/mnt/shared": "shared",  # the checkpoint directory every node mounts
    "/etc/pydet": "node",
    "/var/lib/pydet": "node",
}
# What the admin copies by hand (scp) from the head node to each GPU node.
COPIES = {"/var/lib/pydet/agent-token": "/etc/pydet/", "/etc/pydet/ca.pem": "/etc/pydet/"}
# What a service says in its log once it is ready.
READY = {"det-master": "listening on", "det-agent": "connected to the master"}
READY_SECONDS = 60


@dataclass
class Runbook:
    """The section's blocks, run in order as an admin would with a root shell on each node.

    A node is a ``Host`` of tests/netns.py, or None for this machine. Paths are rooted in
    ``tmp`` (``PATHS``); ``extra`` holds the test's other substitutions.
    """

    tmp: pathlib.Path
    head: Host | None
    gpus: tuple[Host | None, ...]
    extra: dict[str, str] = field(default_factory=dict)
    services: list[tuple[subprocess.Popen[bytes], pathlib.Path]] = field(default_factory=list)
    containers: list[str] = field(default_factory=list)  # started by docker run --name
    outputs: dict[int, str] = field(default_factory=dict)  # README line -> what it printed

    @property
    def workdir(self) -> pathlib.Path:
        """The admin's current directory: the wheel, and a clone's examples."""
        return self.tmp / "admin"

    def prepare(self) -> None:
        """What the admin has before the section starts: the wheel copied to the nodes, a
        clone of the repository, the shared checkpoint directory mounted."""
        build_wheel(self.workdir)
        (self.workdir / "examples").symlink_to(ROOT / "examples")
        (self.root(None, "shared") / "mnt" / "shared" / "checkpoints").mkdir(parents=True)

    def root(self, node: Host | None, kind: str) -> pathlib.Path:
        if kind == "shared":
            return self.tmp / "shared-fs"
        return self.tmp / (node.hostname or node.name if node is not None else "this-machine")

    def table(self, node: Host | None) -> dict[str, str]:
        """The substitutions for a block run on ``node``."""
        paths = {path: f"{self.root(node, kind)}{path}" for path, kind in PATHS.items()}
        return {**paths, **self.extra}

    def run(self, block: Block, node: Host | None) -> str:
        """Run ``block`` on ``node``; what it printed."""
        text = substitute(block.body, self.table(node))
        if block.file is not None:
            path = pathlib.Path(substitute(block.file, self.table(node)))
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            return ""
        if block.service:
            self._start(block, node, text)
            return ""
        argv = ["bash", "-euo", "pipefail", "-c", text]
        proc = subprocess.run(
            argv if node is None else node.command(argv),
            cwd=self.workdir,
            env=self._env(node),
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert proc.returncode == 0, (
            f"{block} on {self._name(node)} exited {proc.returncode}:\n{text}\n"
            f"stdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-4000:]}\n{self.logs()}"
        )
        for name, program in container_names(block):
            self.containers.append(name)
            self._wait_ready(block, program, functools.partial(_docker_logs, name))
        self.outputs[block.line] = self.outputs.get(block.line, "") + proc.stdout
        return proc.stdout

    def copy_to_gpu_nodes(self) -> None:
        """The files README says to copy by hand."""
        for source, target_dir in COPIES.items():
            for gpu in self.gpus:
                src = self.root(self.head, "node") / source.lstrip("/")
                dest = self.root(gpu, "node") / target_dir.lstrip("/")
                dest.mkdir(parents=True, exist_ok=True)
                if src != dest / src.name:
                    shutil.copy2(src, dest)

    def close(self) -> None:
        """Stop every service and remove every container this runbook started."""
        for proc, _ in reversed(self.services):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc, _ in self.services:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for name in self.containers:
            subprocess.run(["docker", "rm", "-f", name], capture_output=True, timeout=60)
        self.services.clear()
        self.containers.clear()

    def logs(self) -> str:
        """The services' and containers' logs, for a failure's message."""
        parts = [
            f"==== {log.name}\n{log.read_text(errors='replace')[-4000:]}"
            for _, log in self.services
        ]
        parts += [f"==== container {n}\n{_docker_logs(n)[-4000:]}" for n in self.containers]
        return "\n".join(parts)

    def _name(self, node: Host | None) -> str:
        return node.hostname or node.name if node is not None else "this machine"

    def _env(self, node: Host | None) -> dict[str, str]:
        home = self.root(node, "node") / "root"
        home.mkdir(parents=True, exist_ok=True)
        return admin_environment(home)

    def _start(self, block: Block, node: Host | None, text: str) -> None:
        program = pathlib.Path(block.commands()[0].split()[0]).name
        assert program in READY, f"{block}: the test does not know when {program} is ready"
        log = self.tmp / f"{program}-{self._name(node).replace(' ', '-')}.log"
        argv = ["bash", "-c", f"exec {text}"]
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                argv if node is None else node.command(argv),
                cwd=self.workdir,
                env=self._env(node),
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self.services.append((proc, log))

        def text_so_far() -> str:
            assert proc.poll() is None, f"{block} on {self._name(node)} exited:\n{self.logs()}"
            return log.read_text(errors="replace")

        self._wait_ready(block, program, text_so_far)

    def _wait_ready(self, block: Block, program: str, log: Callable[[], str]) -> None:
        try:
            wait_until(lambda: READY[program] in log(), READY_SECONDS, f"{program} to be ready")
        except AssertionError as e:
            raise AssertionError(f"{block}: {e}\n{self.logs()}") from None


def _docker_logs(name: str) -> str:
    proc = subprocess.run(
        ["docker", "logs", name], capture_output=True, text=True, timeout=60, check=False
    )
    return proc.stdout + proc.stderr
