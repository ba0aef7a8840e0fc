"""What every provider does for the provisioner, and the startup script each instance runs.

A provider launches instances, terminates them and lists those it launched for this master
and pool; the list is the truth a restarted master starts from, so providers keep no state
of their own in the master. Each instance is launched alone with a script that starts
``det-agent`` with an agent id the master chose, so that the master matches an instance to
its agent by that id on any provider (the id is tagged on the instance, or printed back by
the admin's ``list`` program).
"""

from __future__ import annotations

import secrets
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from pydet.master.provisioner.decider import Instance
from pydet.master.provisioner.settings import ProviderSettings


class ProviderError(Exception):
    """A provider call that failed; the message is one line for people (the master's log,
    the pool in `det agent list`)."""


class Provider(Protocol):
    async def list_instances(self) -> list[Instance]:
        """The live instances of this master's pool (terminated ones may be left out)."""
        ...

    async def launch(self, agent_id: str, startup: str) -> Instance:
        """One instance whose agent registers as ``agent_id``, running ``startup``."""
        ...

    async def terminate(self, instance_ids: Sequence[str]) -> None: ...


@dataclass(frozen=True)
class AgentSetup:
    """What an instance's agent needs to join: where the master is and how to prove it may."""

    master: str  # HOST:PORT, or https://HOST:PORT
    token: str
    ca_cert: str = ""  # PEM of the master's certificate chain when it serves TLS


def new_agent_id(pool: str) -> str:
    return f"{pool}-{secrets.token_hex(4)}"


def startup_script(
    settings: ProviderSettings, setup: AgentSetup, *, pool: str, agent_id: str
) -> str:
    """The instance's startup script (EC2 user data): writes the agent token (and the
    master's CA certificate) into the agent's own directory, readable by root alone, runs
    the admin's ``startup_script`` and ``container_startup_script``, and execs ``det-agent``
    (already on the image: nothing is installed from the internet). The directory is under
    ``$PYDET_AGENT_ROOT`` (default /var/lib/pydet-agent)."""
    q = shlex.quote
    detail = settings.aws or settings.command
    assert detail is not None
    argv = [
        "det-agent",
        "--master",
        setup.master,
        "--agent-id",
        agent_id,
        "--resource-pool",
        pool,
    ]
    lines = [
        "#!/bin/bash",
        f"# pydet agent {agent_id} of resource pool {pool}, launched by the pydet master.",
        "set -euo pipefail",
        "umask 077",
        f'root="${{PYDET_AGENT_ROOT:-/var/lib/pydet-agent}}/{agent_id}"',
        'mkdir -p "$root/work"',
        f"cat > \"$root/agent-token\" <<'PYDET_AGENT_TOKEN'\n{setup.token}\nPYDET_AGENT_TOKEN",
    ]
    args = " ".join(q(a) for a in argv)
    args += ' --work-dir "$root/work" --token-file "$root/agent-token"'
    if setup.ca_cert:
        pem = setup.ca_cert.strip()
        lines.append(f"cat > \"$root/master-ca.crt\" <<'PYDET_MASTER_CA'\n{pem}\nPYDET_MASTER_CA")
        args += ' --master-cert-file "$root/master-ca.crt"'
    if not detail.gpus:
        args += f" --slots {detail.slots}"
    for label, script in (
        ("startup_script", settings.startup_script),
        ("container_startup_script", settings.container_startup_script),
    ):
        if script.strip():
            lines.append(f"# {label} (from the master config)")
            lines.append(
                f"bash <<'PYDET_{label.upper()}'\n{script.rstrip()}\nPYDET_{label.upper()}"
            )
    lines.append(f"exec {args}")
    return "\n".join(lines) + "\n"


def master_address(url: str) -> str:
    """``--master`` for the agent from a provider's ``master_url``: HOST:PORT, keeping an
    https:// scheme (the agent then speaks TLS)."""
    return url.removeprefix("http://")
