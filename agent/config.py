"""The agent's configuration: command-line flags over an optional YAML file.

Everything is parsed and checked once, here, into an ``AgentConfig``; every problem is
collected and reported together in one ``ConfigError`` whose message names the key.
"""

from __future__ import annotations

import argparse
import os
import re
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import yaml

from determined.common import client, errors

# "hollow" is a test and benchmark tool (agent/hollow_runtime.py): it runs no task.
RUNTIMES = ("process", "docker", "hollow")
DOCKER_HARNESS_MODES = ("auto", "image", "mount")
DEFAULT_IMAGE = "pydet-task:latest"
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
_AGENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class ConfigError(Exception):
    """A bad flag or config file; the message is meant for a person."""


@dataclass(frozen=True)
class AgentConfig:
    master: str
    agent_id: str
    slots: int | None  # None: detect GPUs, else one artificial slot
    resource_pool: str
    runtime: str
    work_dir: Path
    address: str | None  # None: this host's address on its route to the master
    log_level: str
    default_image: str = DEFAULT_IMAGE
    docker_harness: str = "auto"
    # The cluster's agent token (read from token_file); the master refuses agents without it.
    token: str = ""
    # The CA certificate (PEM, absolute path) that verifies a TLS master; tasks get it too.
    master_cert_file: str | None = None


# key -> (type, flag help)
_KEYS: dict[str, tuple[type, str]] = {
    "master": (str, "master address HOST:PORT (default: $DET_MASTER, else localhost:8080)"),
    "agent_id": (str, "this agent's id (default: the hostname)"),
    "slots": (int, "number of artificial CPU slots (default: the GPUs found, else 1)"),
    "resource_pool": (str, "resource pool to join (default: default)"),
    "runtime": (
        str,
        "container runtime: process or docker (default: process); hollow, a test and "
        "benchmark tool, runs nothing and plays each trial's calls to the master",
    ),
    "work_dir": (
        str,
        "parent of the containers' working directories (default: /tmp/pydet-agent-AGENT_ID)",
    ),
    "address": (
        str,
        "address other nodes use to reach this one (default: this host's address on its "
        "route to the master)",
    ),
    "log_level": (str, "DEBUG, INFO, WARNING or ERROR (default: INFO)"),
    "token_file": (
        str,
        "file holding the cluster's agent token (the master's security.agent_token_file; "
        "default: $DET_AGENT_TOKEN_FILE)",
    ),
    "master_cert_file": (
        str,
        "CA certificate (PEM) that signed the master's TLS certificate; implies TLS for a "
        "master address without https:// (default: $DET_MASTER_CERT_FILE, else the "
        "system's CAs for an https:// address)",
    ),
    "default_image": (
        str,
        f"docker runtime: image for tasks whose config names none (default: {DEFAULT_IMAGE})",
    ),
    "docker_harness": (
        str,
        "docker runtime: where tasks find the determined harness: image (installed in it), "
        "mount (this host's, mounted read-only), or auto (image if it has the "
        "ai.pydet.harness label, else mount; the default)",
    ),
}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise ConfigError(message)


def _parser() -> _Parser:
    p = _Parser(prog="det-agent", description="The pydet agent: runs the master's tasks.")
    for key, (kind, help_text) in _KEYS.items():
        flag = "--" + key.replace("_", "-")
        p.add_argument(flag, dest=key, type=kind, default=None, help=help_text)
    p.add_argument("--config-file", default=None, help="YAML file with the same keys")
    return p


def load(
    argv: Sequence[str] | None = None, *, environ: dict[str, str] | None = None
) -> AgentConfig:
    """Parse flags (``argv``, default ``sys.argv[1:]``) over the config file they name."""
    args = vars(_parser().parse_args(argv))
    config_file = args.pop("config_file")
    values: dict[str, Any] = _read_file(Path(config_file)) if config_file else {}
    values.update({k: v for k, v in args.items() if v is not None})
    return _build(values, environ if environ is not None else dict(os.environ))


def _read_file(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text()
    except OSError as e:
        raise ConfigError(f"cannot read config file {path}: {e.strerror or e}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        first = str(e).splitlines()[0] if str(e) else "invalid YAML"
        mark = getattr(e, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise ConfigError(f"{path}: not valid YAML{where}: {first}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of keys to values")
    problems = []
    values: dict[str, Any] = {}
    for raw_key, value in data.items():
        key = str(raw_key).replace("-", "_")
        if key not in _KEYS:
            problems.append(f"{raw_key}: unknown key (known: {', '.join(_KEYS)})")
            continue
        kind = _KEYS[key][0]
        if value is None:
            continue
        if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
            problems.append(f"{raw_key}: must be an integer, got {value!r}")
        elif kind is str and not isinstance(value, (str, int, float)):
            problems.append(f"{raw_key}: must be a string, got {value!r}")
        else:
            values[key] = kind(value)
    if problems:
        raise ConfigError(f"{path}: " + "; ".join(problems))
    return values


def _build(values: dict[str, Any], environ: dict[str, str]) -> AgentConfig:
    problems = []
    master = values.get("master") or environ.get("DET_MASTER") or client.DEFAULT_MASTER
    try:
        client.parse_address(master)
    except errors.InvalidArgument as e:
        problems.append(f"master: {e.message}")
    agent_id = values.get("agent_id") or socket.gethostname()
    if not _AGENT_ID.match(agent_id):
        problems.append(
            f"agent_id: {agent_id!r} must start with a letter or digit and contain only "
            "letters, digits, '.', '_' and '-'"
        )
    slots = values.get("slots")
    if slots is not None and slots < 0:
        problems.append(f"slots: must be >= 0, got {slots}")
    resource_pool = values.get("resource_pool") or "default"
    runtime = values.get("runtime") or "process"
    if runtime not in RUNTIMES:
        problems.append(f"runtime: must be one of {', '.join(RUNTIMES)}, got {runtime!r}")
    log_level = (values.get("log_level") or "INFO").upper()
    if log_level not in LOG_LEVELS:
        problems.append(f"log_level: must be one of {', '.join(LOG_LEVELS)}, got {log_level!r}")
    address = values.get("address") or None
    default_image = values.get("default_image") or DEFAULT_IMAGE
    docker_harness = values.get("docker_harness") or "auto"
    if docker_harness not in DOCKER_HARNESS_MODES:
        problems.append(
            f"docker_harness: must be one of {', '.join(DOCKER_HARNESS_MODES)}, "
            f"got {docker_harness!r}"
        )
    work_dir = Path(values.get("work_dir") or f"/tmp/pydet-agent-{agent_id}")
    # Without a token the master refuses the agent, and says how to pass one.
    token = ""
    token_file = values.get("token_file") or environ.get("DET_AGENT_TOKEN_FILE")
    if token_file:
        try:
            token = Path(token_file).expanduser().read_text().strip()
        except OSError as e:
            problems.append(f"token_file: cannot read {token_file}: {e.strerror or e}")
        else:
            if not token:
                problems.append(f"token_file: {token_file} is empty")
    cert_file = values.get("master_cert_file") or environ.get(client.CERT_FILE_ENV) or None
    if cert_file:
        # Absolute: tasks, started in their own working directories, read it too.
        cert_file = str(Path(cert_file).expanduser().resolve())
        try:
            client.tls_context(cert_file, what="master_cert_file")
        except errors.InvalidArgument as e:
            problems.append(e.message)
    if problems:
        raise ConfigError("; ".join(problems))
    return AgentConfig(
        master=master,
        agent_id=agent_id,
        slots=slots,
        resource_pool=resource_pool,
        runtime=runtime,
        work_dir=work_dir,
        address=address,
        log_level=log_level,
        default_image=default_image,
        docker_harness=docker_harness,
        token=token,
        master_cert_file=cert_file,
    )
