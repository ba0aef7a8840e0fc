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
where to run it. The tests (tests/multihost/ and tests/docker/) run the blocks in order,
with the substitutions an admin makes, which they list in one table each.
"""

from __future__ import annotations

import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Mapping
from dataclasses import dataclass

from tests.cluster import ROOT

README = ROOT / "README.md"
TITLE = "Deploying on many machines"
DOCKER_SUBSECTION = "With the Docker image"

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
    docker: bool = False  # under "With the Docker image"

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
    docker = False
    i = start + 1
    while i < len(lines) and not lines[i].startswith("## "):
        line = lines[i]
        if line.startswith("### "):
            docker = line == f"### {DOCKER_SUBSECTION}"
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
        found.append(Block(block.line, block.where, block.body, block.service, block.file, docker))
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
    from a copy so that the checkout stays as it is."""
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


def container_names(block: Block) -> list[str]:
    """The ``--name`` of each ``docker run`` in ``block``: what to remove afterwards."""
    names = []
    for command in block.commands():
        argv = shlex.split(command)
        if argv[:2] == ["docker", "run"] and "--name" in argv:
            names.append(argv[argv.index("--name") + 1])
    return names
