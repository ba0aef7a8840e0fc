"""`det shell`: real OpenSSH (sshd in the task, the system's ssh and scp here), reached
through the master's one port with the user's session, for the shell's owner only."""

from __future__ import annotations

import json
import os
import pathlib
import shlex
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests.cluster import Cluster, cluster_fixture, wait_until

if shutil.which("sshd", path="/usr/sbin:/usr/bin") is None or shutil.which("ssh") is None:
    pytest.skip(
        "needs OpenSSH (apt-get install openssh-server openssh-client)", allow_module_level=True
    )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from cluster_fixture(tmp_path_factory.mktemp("shells"), slots=2)


@pytest.fixture(scope="module")
def shell_id(cluster: Cluster) -> str:
    found = cluster.det("shell", "start", "-d").stdout.strip()
    wait_until(
        lambda: any(s["id"] == found and s["state"] == "STATE_RUNNING" for s in _shells(cluster)),
        60,
        "the shell's sshd",
    )
    return found


def _shells(cluster: Cluster) -> list[dict[str, Any]]:
    return list(json.loads(cluster.det("shell", "list", "-a", "--json").stdout))


def test_a_shell_runs_commands_over_ssh_through_the_master(cluster: Cluster, shell_id: str) -> None:
    out = cluster.det("shell", "open", shell_id, "--", "hostname").stdout
    assert out.strip() == socket.gethostname()
    # A session has the task's environment: its ids, and its Python (with the harness) on
    # its PATH; a login's rc files may put others first (pyenv's shims, say), as they would
    # in any container.
    python = os.path.join(os.path.dirname(sys.executable), "python3")
    out = cluster.det(
        "shell",
        "open",
        shell_id,
        "--",
        f"echo $DET_TASK_ID $DET_TASK_TYPE $PATH; {python} -c 'import determined'",
    ).stdout
    task_id, task_type, path = out.split()
    assert [task_id, task_type] == [shell_id, "SHELL"]
    assert os.path.dirname(sys.executable) in path.split(os.pathsep)
    failed = cluster.det("shell", "open", shell_id, "--", "exit 7", check=False)
    assert failed.returncode == 7
    (listed,) = [s for s in _shells(cluster) if s["id"] == shell_id]
    assert listed["private_key"] == "" and listed["public_key"].startswith("ssh-ed25519 ")
    assert listed["agent_user"] == os.environ.get("USER", listed["agent_user"])


def test_the_printed_ssh_command_serves_scp_too(
    cluster: Cluster, shell_id: str, tmp_path: pathlib.Path
) -> None:
    printed = cluster.det("shell", "show-ssh-command", shell_id).stdout.strip()
    words = shlex.split(printed)
    assert words[0].endswith("ssh") and "ProxyCommand=" in printed and " -i " in printed
    *options, destination = words[1:]
    assert destination.endswith(f"@{shell_id}")
    key = options[options.index("-i") + 1]
    assert oct(os.stat(key).st_mode & 0o777) == "0o600"
    local = tmp_path / "payload.txt"
    local.write_text("copied with scp\n")
    remote = f"/tmp/det-shell-test-{shell_id[:8]}.txt"
    subprocess.run(
        ["scp", "-q", *options, str(local), f"{destination}:{remote}"],
        env=cluster.env,
        check=True,
        timeout=60,
    )
    assert cluster.det("shell", "open", shell_id, "--", "cat", remote).stdout == "copied with scp\n"


def test_only_its_owner_or_an_admin_opens_or_kills_a_shell(cluster: Cluster, shell_id: str) -> None:
    cluster.det("user", "create", "oscar", "--password", "oscar-secret-1")
    for args in (
        ("shell", "open", shell_id, "--", "true"),
        ("shell", "show-ssh-command", shell_id),
        ("shell", "kill", shell_id),
    ):
        proc = cluster.det_as("oscar", "oscar-secret-1", *args)
        assert proc.returncode == 1, (args, proc)
        assert f"only the owner of shell {shell_id} or a user with" in proc.stderr
        assert "BEGIN OPENSSH PRIVATE KEY" not in proc.stdout + proc.stderr
    # Nor does the tunnel let another user's session through to its sshd.
    oscar = cluster.login("oscar", "oscar-secret-1")
    env = {**cluster.env, "DET_USER": "oscar"}
    config = pathlib.Path(env["XDG_CONFIG_HOME"]) / "pydet" / "auth.json"
    assert oscar and config.exists()
    tunnel = subprocess.run(
        [sys.executable, "-m", "pydet.cli.tunnel", cluster.address, shell_id, "-u", "oscar"],
        env=env,
        input=b"SSH-2.0-probe\r\n",
        capture_output=True,
        timeout=60,
    )
    assert tunnel.returncode == 1 and b"SSH-2.0-OpenSSH" not in tunnel.stdout
    assert b"only the owner of task" in tunnel.stderr


def test_without_ssh_the_cli_says_what_to_install(cluster: Cluster, shell_id: str) -> None:
    env = {**cluster.env, "PATH": os.path.dirname(sys.executable)}
    proc = subprocess.run(
        [sys.executable, "-m", "pydet.cli", "shell", "open", shell_id],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        "Error: ssh is not installed: install OpenSSH's client (Debian and Ubuntu: apt-get "
        "install openssh-client; macOS and Windows have it)"
    ]


def test_a_killed_shell_is_gone(cluster: Cluster) -> None:
    found = cluster.det("shell", "start", "-d").stdout.strip()
    assert f"Killed shell {found}" in cluster.det("shell", "kill", found).stdout
    wait_until(lambda: all(s["id"] != found for s in _shells(cluster)), 30, "the kill")
    proc = cluster.det("shell", "open", found, "--", "true", check=False)
    assert proc.returncode == 1 and f"shell {found} has ended" in proc.stderr
