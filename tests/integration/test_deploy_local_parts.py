"""`det deploy local master-up|master-down|agent-up|agent-down|logs` and cluster-up's
Determined flags, with real processes: the parts of one local cluster started and stopped
one at a time, in the data directory its --cluster-name names."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
from collections.abc import Iterator

import pytest

import determined
from tests.cluster import Det, free_port, local_det


@pytest.fixture
def data_dir(tmp_path: pathlib.Path) -> pathlib.Path:
    return tmp_path / "local"


@pytest.fixture
def det(tmp_path: pathlib.Path, data_dir: pathlib.Path) -> Iterator[Det]:
    """`det` as a user runs it; stops the cluster in ``data_dir`` at the end."""
    yield from local_det(tmp_path, data_dir)


def ok(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, proc
    return proc.stdout


def agents(det: Det, port: int) -> dict[str, bool]:
    listed = json.loads(ok(det("agent", "list", "--json", master=port)))
    return {a["id"]: a["connected"] for a in listed}


@pytest.mark.slow
def test_the_parts_of_a_cluster_start_and_stop_one_at_a_time(
    det: Det, data_dir: pathlib.Path
) -> None:
    port = free_port()
    where = ["--data-dir", str(data_dir)]
    out = ok(det("deploy", "local", "master-up", "--master-port", str(port), *where))
    assert f"Master at http://localhost:{port}" in out
    assert agents(det, port) == {}
    out = ok(
        det(
            "deploy", "local", "agent-up", "localhost", "--master-port", str(port),
            "--agent-name", "a1", "--no-gpu", *where,
        )
    )  # fmt: skip
    assert "Agent a1 is connected" in out
    ok(det("deploy", "local", "agent-up", "localhost", "--master-port", str(port), *where))
    assert agents(det, port) == {"a1": True, f"det-agent-{os.uname().nodename}": True}
    again = det(
        "deploy", "local", "agent-up", "localhost", "--master-port", str(port),
        "--agent-name", "a1", *where,
    )  # fmt: skip
    assert again.returncode == 1 and "agent a1 is already running" in again.stderr
    # The master goes; its agents stay and wait for the next one.
    assert "Stopped the local master" in ok(det("deploy", "local", "master-down", *where))
    state = json.loads((data_dir / "cluster.json").read_text())
    assert state["master"] is None and len(state["agents"]) == 2
    ok(det("deploy", "local", "master-up", "--master-port", str(port), *where))
    assert "listening on" in ok(det("deploy", "local", "logs", "--no-follow", *where))
    assert "Stopped 1 agent(s): a1" in ok(
        det("deploy", "local", "agent-down", "--agent-name", "a1", *where)
    )
    missing = det("deploy", "local", "agent-down", "--agent-name", "a1", *where)
    assert missing.returncode == 1 and "agent a1 is not running here" in missing.stderr
    assert "Traceback" not in missing.stderr
    assert "Stopped 1 agent(s)" in ok(det("deploy", "local", "agent-down", "--all", *where))
    neither = det("deploy", "local", "agent-down", *where)
    assert neither.returncode == 1 and "--agent-name NAME, or --all" in neither.stderr


def test_an_agent_needs_its_clusters_token(det: Det, tmp_path: pathlib.Path) -> None:
    out = det("deploy", "local", "agent-up", "localhost", "--data-dir", str(tmp_path / "none"))
    assert out.returncode == 1 and "no agent token at" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.slow
def test_cluster_up_takes_determineds_flags(
    det: Det, data_dir: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    port = free_port()
    storage = tmp_path / "checkpoints"
    up = det(
        "deploy", "local", "cluster-up", "--data-dir", str(data_dir), "--master-port",
        str(port), "--no-gpu", "--storage-host-path", str(storage),
        "--initial-user-password", "Chosen-password-1",
    )  # fmt: skip
    assert "Set the admin password given with --initial-user-password" in ok(up)
    assert (data_dir / "master" / "admin-password").read_text().strip() == "Chosen-password-1"
    config = json.loads(ok(det("master", "config", "--json", master=port)))
    assert config["checkpoint_storage"] == {"type": "shared_fs", "host_path": str(storage)}
    assert storage.is_dir()
    (agent,) = json.loads(ok(det("slot", "list", "--json", master=port)))
    assert agent["device"]["type"] == "CPU"
    both = det(
        "deploy", "local", "cluster-up", "--data-dir", str(tmp_path / "x"),
        "--master-config-path", "m.yaml", "--storage-host-path", str(storage),
    )  # fmt: skip
    assert both.returncode == 2 and "not allowed with argument" in both.stderr
    # cluster-down --delete-db: the next cluster is a new one, with a new admin password.
    ok(det("deploy", "local", "cluster-down", "--data-dir", str(data_dir), "--delete-db"))
    assert not (data_dir / "master" / "pydet.db").exists()
    ok(
        det(
            "deploy", "local", "cluster-up", "--data-dir", str(data_dir), "--master-port", str(port)
        )
    )
    assert (data_dir / "master" / "admin-password").read_text().strip() != "Chosen-password-1"


def test_the_cluster_name_chooses_the_data_directory(det: Det, tmp_path: pathlib.Path) -> None:
    port = free_port()
    named = tmp_path / "home" / ".local" / "share" / "pydet" / "local-lab"
    try:
        ok(
            det(
                "deploy", "local", "cluster-up", "--cluster-name", "lab", "--agents", "0",
                "--master-port", str(port),
            )
        )  # fmt: skip
        assert (named / "cluster.json").is_file()
    finally:
        ok(det("deploy", "local", "cluster-down", "--cluster-name", "lab"))
    bad = det("deploy", "local", "cluster-down", "--cluster-name", "a/b")
    assert bad.returncode == 1 and "--cluster-name: 'a/b' cannot name a directory" in bad.stderr


def test_determineds_deploy_flags_mean_what_they_can_for_processes(
    det: Det, data_dir: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    port = free_port()
    where = ["--data-dir", str(data_dir)]
    work = tmp_path / "work"
    # Unbuilt master/agent images and a second edition cannot mean anything here: refused
    # before anything starts.
    for flags, said in (
        (["--enterprise-edition"], "--enterprise-edition: pydet has one edition"),
        (["--image-repo-prefix", "me"], "--image-repo-prefix: pydet's local deploy starts"),
        (["--det-version", "9.9.9"], "--det-version 9.9.9: the local deploy runs the installed"),
        (["--db-password", "pw"], "--db-password: the master keeps its store in SQLite"),
    ):
        refused = det("deploy", "local", "master-up", "--master-port", str(port), *flags, *where)
        assert refused.returncode == 1 and said in refused.stderr, refused
        assert len(refused.stderr.strip().splitlines()) == 1
    top = det("deploy", "--image-repo-prefix", "me", "local", "cluster-up", *where)
    assert top.returncode == 1 and "--image-repo-prefix" in top.stderr
    assert not (data_dir / "cluster.json").exists()

    out = ok(
        det(
            "deploy", "local", "cluster-up", "--master-port", str(port), "--no-gpu",
            "--auto-work-dir", str(work), "--no-autorestart", "--det-version",
            determined.__version__, *where,
        )
    )  # fmt: skip
    assert "Cluster ready" in out
    # A command whose config names no working directory runs in the --auto-work-dir.
    ran = ok(det("cmd", "run", "pwd", master=port))
    assert str(work.resolve()) in ran.splitlines()
    # The master is named after its cluster; master-down stops it by that name only.
    state = json.loads((data_dir / "cluster.json").read_text())
    assert state["master"]["name"] == "determined_determined-master"
    wrong = det("deploy", "local", "master-down", "--master-name", "other", *where)
    assert wrong.returncode == 1 and "no local master named 'other'" in wrong.stderr
    out = ok(
        det(
            "deploy", "local", "master-down", "--master-name", "determined_determined-master",
            *where,
        )
    )  # fmt: skip
    assert "Stopped the local master determined_determined-master" in out

    # --no-wait-for-master: back at once, before the master answers.
    out = ok(
        det(
            "deploy", "--no-wait-for-master", "local", "master-up", "--master-port", str(port),
            "--master-name", "lab-master", *where,
        )
    )  # fmt: skip
    assert "not waiting for it" in out and "Its name is lab-master" in out
    state = json.loads((data_dir / "cluster.json").read_text())
    assert state["master"]["name"] == "lab-master"
