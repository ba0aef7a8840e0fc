"""`det deploy local`: the parts that need neither sockets nor child processes."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from pydet.cli import deploy, local_cluster, local_config
from pydet.cli.__main__ import main
from pydet.cli.local_cluster import ClusterState, Proc

ON_LINUX = Path("/proc/self/cmdline").exists()


def dead_pid() -> int:
    """A pid number no process can have (above the kernel's maximum)."""
    try:
        return int(Path("/proc/sys/kernel/pid_max").read_text()) + 1
    except OSError:
        return 2**22 + 1


def own_argv() -> list[str]:
    return [a.decode() for a in Path("/proc/self/cmdline").read_bytes().split(b"\0") if a]


def test_master_and_agent_command_lines(tmp_path: Path) -> None:
    assert deploy.master_argv(8123, tmp_path) == [
        sys.executable, "-P", "-m", "pydet.master", "--host", "127.0.0.1", "--port", "8123",
        "--data-dir", str(tmp_path / "master"),
    ]  # fmt: skip
    argv = deploy.agent_argv(
        8123, "host-0", tmp_path / "agent-0", None, "process", token_file=tmp_path / "tok"
    )
    assert argv == [
        sys.executable, "-P", "-m", "pydet.agent", "--master", "localhost:8123",
        "--token-file", str(tmp_path / "tok"),
        "--agent-id", "host-0", "--work-dir", str(tmp_path / "agent-0"),
        "--resource-pool", "default", "--runtime", "process",
    ]  # fmt: skip
    argv = deploy.agent_argv(8123, "host-1", tmp_path, 4, "docker")
    assert argv[-4:] == ["--runtime", "docker", "--slots", "4"]


def test_state_file_round_trips(tmp_path: Path) -> None:
    master = Proc("master", 10, ["python", "-m", "pydet.master"], str(tmp_path / "master.log"))
    agent = Proc("h-0", 11, ["python", "-m", "pydet.agent"], str(tmp_path / "agent-0.log"))
    local_cluster.write_state(tmp_path, ClusterState(9000, master, [agent]))
    assert local_cluster.read_state(tmp_path) == ClusterState(9000, master, [agent])
    local_cluster.remove_state(tmp_path)
    assert local_cluster.read_state(tmp_path) is None


def test_a_damaged_state_file_counts_as_no_cluster(tmp_path: Path) -> None:
    (tmp_path / local_cluster.STATE_FILE).write_text('{"master_port": 1')
    assert local_cluster.read_state(tmp_path) is None


def test_cluster_down_without_a_cluster_is_fine(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["deploy", "local", "cluster-down", "--data-dir", str(tmp_path)]) == 0
    assert "No local cluster is running" in capsys.readouterr().out


def test_cluster_down_after_a_crash_clears_the_stale_state(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gone = Proc("master", dead_pid(), ["python", "-m", "pydet.master"], str(tmp_path / "m.log"))
    local_cluster.write_state(tmp_path, ClusterState(9000, gone, []))
    assert main(["deploy", "local", "cluster-down", "--data-dir", str(tmp_path)]) == 0
    assert "No local cluster is running" in capsys.readouterr().out
    assert not (tmp_path / local_cluster.STATE_FILE).exists()


@pytest.mark.skipif(not ON_LINUX, reason="needs /proc")
def test_a_reused_pid_is_not_mistaken_for_our_daemon() -> None:
    assert local_cluster.alive(Proc("master", os.getpid(), own_argv(), "log"))
    impostor = Proc("master", os.getpid(), [sys.executable, "-m", "pydet.master"], "log")
    assert not local_cluster.alive(impostor)
    assert not local_cluster.stop([impostor])  # nothing signalled, nothing killed


@pytest.fixture
def no_start(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Proc:
        raise AssertionError("started a process")

    monkeypatch.setattr(local_cluster, "start", refuse)


def test_port_in_use_is_refused_before_starting_anything(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    no_start: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(deploy, "port_in_use", lambda port: True)
    argv = ["deploy", "local", "cluster-up", "--master-port", "8765", "--data-dir", str(tmp_path)]
    assert main(argv) == 1
    assert capsys.readouterr().err == (
        "Error: port 8765 is in use; choose another with --master-port\n"
    )


@pytest.mark.skipif(not ON_LINUX, reason="needs /proc")
def test_cluster_up_is_idempotent_when_the_cluster_is_healthy(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    no_start: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    me = Proc("master", os.getpid(), own_argv(), str(tmp_path / "master.log"))
    local_cluster.write_state(tmp_path, ClusterState(9001, me, []))
    monkeypatch.setattr(deploy, "healthy", lambda port: port == 9001)
    assert main(["deploy", "local", "cluster-up", "--data-dir", str(tmp_path)]) == 0
    assert "already running: master at http://localhost:9001" in capsys.readouterr().out


def test_a_master_that_dies_on_start_is_reported_with_its_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def start(name: str, argv: list[str], log: Path, cwd: Path) -> Proc:
        log.write_text("starting\ncannot open database: disk full\n")
        return Proc(name, dead_pid(), argv, str(log))

    monkeypatch.setattr(local_cluster, "start", start)
    monkeypatch.setattr(deploy, "port_in_use", lambda port: False)
    monkeypatch.setattr(deploy, "healthy", lambda port: False)
    assert main(["deploy", "local", "cluster-up", "--data-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"Error: the master exited; last lines of {tmp_path / 'master.log'}:")
    assert "  cannot open database: disk full" in err
    assert not (tmp_path / local_cluster.STATE_FILE).exists()  # nothing left behind


def test_a_master_config_file_merges_mappings_and_replaces_lists() -> None:
    ours = {"port": 8080, "security": {"max_connections": 10, "session_lifetime": 60}}
    ours["resource_pools"] = [{"pool_name": "default"}]
    theirs = {"security": {"session_lifetime": 5}, "resource_pools": [{"pool_name": "gpu"}]}
    assert local_config.merged(ours, theirs) == {
        "port": 8080,
        "security": {"max_connections": 10, "session_lifetime": 5},
        "resource_pools": [{"pool_name": "gpu"}],
    }


def test_relative_paths_in_a_master_config_file_are_from_where_cluster_up_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The master runs in the data directory: it gets the paths as the user meant them.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pw").write_text("secret\n")
    user = tmp_path / "mine.yaml"
    user.write_text(
        "db: {type: postgres, password_file: pw}\n"
        "checkpoint_storage: {type: shared_fs, host_path: ckpts}\n"
    )
    master = local_config.prepare(user, port=8123, host="127.0.0.1", data_dir=tmp_path / "d")
    assert master.config_file is not None
    written = yaml.safe_load(master.config_file.read_text())
    assert written["db"] == {"type": "postgres", "password_file": str(tmp_path / "pw")}
    assert written["checkpoint_storage"]["host_path"] == str(tmp_path / "ckpts")
    assert written["port"] == 8123 and written["data_dir"] == str(tmp_path / "d" / "master")
    assert master.agent_token_file == tmp_path / "d" / "master" / "agent-token"
