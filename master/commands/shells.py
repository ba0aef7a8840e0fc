"""Shells (`det shell`): OpenSSH's sshd run in the task, with a key pair the master makes for
that shell, reached by the user's own ssh through the master's one port: the proxy carries
the TCP connection over a WebSocket (the ``ProxyCommand`` that ``det`` runs), for the
shell's owner or an admin with a session. No agent port is published; the sshd listens on
the port the master declared for it on its agent's address, and accepts only that key."""

from __future__ import annotations

from collections.abc import Mapping

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

from determined.api.gen import v1
from pydet.master.agents.table import Agent
from pydet.master.commands.launcher import shown, start_order
from pydet.master.tasks.allocation import Allocation
from pydet.master.tasks.generic import GenericTask, GenericTasks, Kind, TaskType

# The public key its sshd lets in.
AUTHORIZED_KEY_ENV = "DET_SHELL_AUTHORIZED_KEY"


def new_extra() -> dict[str, object]:
    """A shell's key pair, in OpenSSH's formats."""
    key = ed25519.Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    return {"private_key": private.decode(), "public_key": public.decode() + " det-shell"}


def to_proto(task: GenericTask, *, with_key: bool = False) -> v1.Shell:
    """The shell as the API shows it; its private key only for its owner (``with_key``)."""
    return v1.Shell(
        **shown(task),
        private_key=str(task.extra.get("private_key", "")) if with_key else "",
        public_key=str(task.extra.get("public_key", "")),
        agent_user=task.proxy_user,
        service_address=task.service_address,
    )


def register(generic: GenericTasks) -> None:
    info = generic.info

    def start(
        task: GenericTask, alloc: Allocation, agents: Mapping[str, Agent]
    ) -> v1.StartContainer:
        env = {AUTHORIZED_KEY_ENV: str(task.extra["public_key"])}
        return start_order(task, alloc, info, agents, env)

    generic.register(TaskType.SHELL, Kind(start, ports=1, tcp=True))
