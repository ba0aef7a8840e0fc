"""A shell's task (``det shell start``): OpenSSH's sshd, on the port the master declared for
it on its agent's address, letting in only the key the master made for this shell
(``DET_SHELL_AUTHORIZED_KEY``). Once it accepts connections, the address is reported with
the user it logs in as, and the master's proxy carries ``det shell open``'s connections to it.

Its configuration, host key and authorized key live in a private directory of the task's; a
session gets the task's environment (``DET_*``, ``PATH`` with the task's Python, the config's
variables) through the authorized key's ``environment=`` options. sshd runs as the task's
user: as root it needs its privilege separation directory, made here when missing.
"""

from __future__ import annotations

import getpass
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from types import FrameType
from typing import Any

from determined.exec import _proxied

READY_TIMEOUT = 60.0
# What a session does not take from the task's environment: sshd's own, and the shell's.
_NOT_PASSED = frozenset({"PWD", "OLDPWD", "SHLVL", "_", "HOME", "USER", "LOGNAME", "SHELL"})
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _sshd() -> str | None:
    return shutil.which("sshd", path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin"]))


def authorized_keys(key: str, env: Mapping[str, str]) -> str:
    """The one key it lets in, with the task's environment for its sessions."""
    options = []
    for name, value in sorted(env.items()):
        if name in _NOT_PASSED or name.startswith("SSH_") or not _NAME.fullmatch(name):
            continue
        if "\n" in value or '"' in value:
            continue  # not expressible in an option; such a variable stays out
        options.append(f'environment="{name}={value}"')
    return ",".join([*options, "no-agent-forwarding"]) + f" {key.strip()}\n"


def sshd_config(directory: Path, host: str, port: int) -> str:
    return "\n".join(
        [
            f"ListenAddress {host}",
            f"Port {port}",
            f"HostKey {directory / 'host_key'}",
            f"AuthorizedKeysFile {directory / 'authorized_keys'}",
            f"PidFile {directory / 'sshd.pid'}",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "PubkeyAuthentication yes",
            "PermitRootLogin prohibit-password",
            "PermitUserEnvironment yes",
            "UsePAM no",
            # Its files are the task's, in the task's directory; not the user's own ~/.ssh.
            "StrictModes no",
            "AllowTcpForwarding yes",
            "X11Forwarding no",
            "PrintMotd no",
            "Subsystem sftp internal-sftp",
            "LogLevel INFO",
            "",
        ]
    )


def serve(config: Mapping[str, Any], env: Mapping[str, str] = os.environ) -> int:
    """Run sshd until it exits (or the task is killed); its exit status."""
    sshd = _sshd()
    if sshd is None:
        return _proxied.fail(
            "sshd is not installed where this task runs; install OpenSSH's server there "
            "(Debian: apt-get install openssh-server), or use an image with it"
        )
    keygen = shutil.which("ssh-keygen")
    if keygen is None:
        return _proxied.fail("ssh-keygen is not installed where this task runs (openssh-client)")
    try:
        host, port = _proxied.address(env)
    except _proxied.NotServing as e:
        return _proxied.fail(str(e))
    directory = Path(tempfile.mkdtemp(prefix="det-shell-"))
    subprocess.run(
        [keygen, "-q", "-t", "ed25519", "-N", "", "-f", str(directory / "host_key")],
        check=True,
        stdin=subprocess.DEVNULL,
    )
    (directory / "authorized_keys").write_text(
        authorized_keys(env["DET_SHELL_AUTHORIZED_KEY"], env)
    )
    (directory / "sshd_config").write_text(sshd_config(directory, host, port))
    if os.geteuid() == 0:
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    proc = subprocess.Popen([sshd, "-D", "-e", "-f", str(directory / "sshd_config")])

    def stop(signum: int, frame: FrameType | None) -> None:
        proc.send_signal(signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        _proxied.wait_until(lambda: _proxied.port_open(host, port), proc, READY_TIMEOUT, "sshd")
    except _proxied.NotServing as e:
        if proc.poll() is None:
            proc.kill()
        _proxied.fail(str(e))
        return proc.wait() or 1
    _proxied.report(host, port, user=getpass.getuser(), env=env)
    print(f"sshd is ready for det shell open {env.get('DET_TASK_ID', '')}", file=sys.stderr)
    return proc.wait()
