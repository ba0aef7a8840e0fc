"""`det shell start|open|show-ssh-command|list|logs|kill|set priority|config`: SSH into a task
on the cluster with the system's OpenSSH client (Determined's command names and flags).

ssh reaches the shell's sshd through the master's one port: its ``ProxyCommand`` runs
``python -m pydet.cli.tunnel``, which opens a WebSocket to ``/proxy/<id>/`` with the user's
session. The key is the shell's own, fetched from the master (its owner or an admin only)
into a file of mode 0600 for the time ssh runs, or kept under the user's cache directory by
``show-ssh-command`` (for VS Code, PyCharm, scp). Arguments after ``--`` go to ssh: options,
then a command to run instead of a login shell.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from determined.common import client, errors
from pydet.cli import Subparsers, auth, ntsc

API = ntsc.api_for("shell")
# How long `start` waits for the shell's sshd before it gives up (and kills the shell).
START_TIMEOUT = 300.0
_POLL = 0.2


def add_parser(nouns: Subparsers) -> None:
    verbs = ntsc.add_noun(nouns, API, "manage shells")

    p = verbs.add_parser("start", help="start a new shell and open it")
    ntsc.add_config_flags(p, "shell")
    p.add_argument(
        "--show-ssh-command", action="store_true", help="print the ssh command (for an IDE)"
    )
    p.add_argument("ssh_opts", nargs="*", metavar="SSH_ARGS", help="arguments for ssh (after --)")
    p.set_defaults(func=start)

    p = verbs.add_parser("open", help="open an existing shell")
    p.add_argument("shell_id", metavar="SHELL_ID")
    p.add_argument(
        "--show-ssh-command", action="store_true", help="print the ssh command (for an IDE)"
    )
    p.add_argument(
        "ssh_opts", nargs="*", metavar="SSH_ARGS", help="ssh options, then a command to run"
    )
    p.set_defaults(func=open_shell)

    p = verbs.add_parser("show-ssh-command", help="print the ssh command (for an IDE)")
    p.add_argument("shell_id", metavar="SHELL_ID")
    p.add_argument("ssh_opts", nargs="*", metavar="SSH_ARGS", help="more arguments for ssh")
    p.set_defaults(func=show_ssh_command)
    # Determined's older spelling, which it keeps (hidden) with a deprecation warning.
    p = verbs.add_parser("show_ssh_command")
    p.add_argument("shell_id", metavar="SHELL_ID")
    p.add_argument("ssh_opts", nargs="*", metavar="SSH_ARGS", help="more arguments for ssh")
    p.set_defaults(func=show_ssh_command_legacy)
    ntsc.add_common_parsers(verbs, API)


def _ssh() -> str:
    found = shutil.which("ssh")
    if found is None:
        raise errors.FailedPrecondition(
            "ssh is not installed: install OpenSSH's client (Debian and Ubuntu: apt-get install "
            "openssh-client; macOS and Windows have it)"
        )
    return found


def ssh_command(
    master: str, shell: Any, key_path: str, extra: Sequence[str], user: str | None
) -> list[str]:
    """The ssh command line that reaches ``shell`` through ``master``."""
    proxy = [sys.executable, "-m", "pydet.cli.tunnel", master, "%h"]
    if user:
        proxy[4:4] = ["-u", user]
    cert = client.master_cert_file()
    if cert:
        proxy[4:4] = ["--cert-file", cert]
    return [
        _ssh(),
        "-o",
        f"ProxyCommand={shlex.join(proxy)}",
        "-o",
        "StrictHostKeyChecking=no",
        "-o",
        "UserKnownHostsFile=/dev/null",
        "-o",
        "LogLevel=ERROR",
        "-o",
        "IdentitiesOnly=yes",
        "-i",
        key_path,
        f"{shell.agent_user or 'root'}@{shell.id}",
        *extra,
    ]


@contextlib.contextmanager
def _key_file(shell: Any, keep: bool) -> Iterator[str]:
    """The shell's private key in a file only this user reads: kept under the cache
    directory (``keep``, for a printed command), else removed when ssh is done."""
    if keep:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        directory = base / "pydet" / "shell" / shell.id
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = directory / "key"
        path.unlink(missing_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(shell.private_key)
        yield str(path)
        return
    fd, name = tempfile.mkstemp(prefix="det-shell-")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(shell.private_key)
        yield name
    finally:
        with contextlib.suppress(OSError):
            os.unlink(name)


def _running(master: str | None, shell_id: str, *, wait: bool) -> Any:
    """The shell with its key (GetShell), once its sshd serves when ``wait``."""
    from determined.api import lite as v1
    from pydet.cli import quick

    with quick.Session(master) as s:
        s.login()
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            shell = s.call("get_shell", v1.GetShellRequest(shell_id=shell_id)).shell
            if ntsc.state_name(shell) == "STATE_RUNNING" and shell.agent_user:
                return shell
            if ntsc.state_name(shell) == "STATE_TERMINATED":
                raise errors.DetError(f"shell {shell_id} has ended: {shell.exit_status}")
            if not wait:
                state = ntsc.state_name(shell)
                raise errors.FailedPrecondition(
                    f"shell {shell_id} is {state}; it must be STATE_RUNNING to open"
                )
            if time.monotonic() > deadline:
                s.call("kill_shell", v1.KillShellRequest(shell_id=shell_id))
                raise errors.DetError(
                    f"the shell's sshd did not answer within {START_TIMEOUT:.0f}s; shell "
                    f"{shell_id} was killed (see det shell logs {shell_id})"
                )
            time.sleep(_POLL)


def _resolve(master: str | None, prefix: str) -> str:
    if len(prefix) == 36:
        return prefix
    from pydet.cli import rpc

    async def body(s: client.Session) -> str:
        return await ntsc.expand(s, API, prefix)

    return rpc.run(master, body)


def _open(args: argparse.Namespace, shell_id: str, *, wait: bool, print_only: bool) -> int:
    address = client.master_address(args.master)
    shell = _running(args.master, shell_id, wait=wait)
    user = auth.wanted_user(address)
    keep = print_only or getattr(args, "show_ssh_command", False)
    extra = list(args.ssh_opts)
    with _key_file(shell, keep) as key:
        command = ssh_command(address, shell, key, extra, user)
        if keep:
            print(shlex.join(command), flush=True)
        if print_only:
            return 0
        code = subprocess.run(command, check=False).returncode
    if not extra and sys.stdin.isatty():
        print(f"To reconnect, run: det shell open {shell.id}", file=sys.stderr)
    return code


def start(args: argparse.Namespace) -> int:
    from determined.api.gen import v1
    from pydet.cli import rpc

    if not args.detach:
        _ssh()  # before anything is launched
    request = v1.LaunchShellRequest(
        config=ntsc.config_struct(ntsc.load_config(args)),
        template_name=args.template or "",
        context=ntsc.context_of(args),
    )

    async def body(s: client.Session) -> Any:
        request.workspace_id = await ntsc.workspace_id(s, args)
        return rpc.present((await s.call(s.stub.launch_shell(request))).shell, "shell")

    shell = rpc.run(args.master, body)
    if args.detach:
        print(shell.id)
        return 0
    ntsc.launched("shell", shell.id, shell.description)
    return _open(args, shell.id, wait=True, print_only=False)


def open_shell(args: argparse.Namespace) -> int:
    return _open(args, _resolve(args.master, args.shell_id), wait=False, print_only=False)


def show_ssh_command(args: argparse.Namespace) -> int:
    return _open(args, _resolve(args.master, args.shell_id), wait=False, print_only=True)


def show_ssh_command_legacy(args: argparse.Namespace) -> int:
    print(
        "DEPRECATION WARNING: show_ssh_command is deprecated; use show-ssh-command",
        file=sys.stderr,
    )
    return show_ssh_command(args)
