"""`det deploy local cluster-up --master-config FILE` and `--agents 0`, with real processes:
FILE is merged over cluster-up's own settings for its master, a bad FILE is one line naming
it and the field before anything starts, and a master alone is up once it is healthy."""

from __future__ import annotations

import pathlib
import subprocess
from collections.abc import Iterator

import pytest

from tests.cluster import Det, free_port, local_det


@pytest.fixture
def data_dir(tmp_path: pathlib.Path) -> pathlib.Path:
    return tmp_path / "local"


@pytest.fixture
def det(tmp_path: pathlib.Path, data_dir: pathlib.Path) -> Iterator[Det]:
    """`det` as a user runs it; stops the cluster in ``data_dir`` at the end."""
    yield from local_det(tmp_path, data_dir)


def cluster_up(det: Det, data_dir: pathlib.Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return det("deploy", "local", "cluster-up", "--data-dir", str(data_dir), "--slots", "1", *flags)


def test_the_master_runs_with_the_config_file_merged_over_cluster_ups_own(
    det: Det, data_dir: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    port = free_port()
    config = tmp_path / "master.yaml"
    # FILE's port wins over --master-port; its pools replace the default pool whole.
    config.write_text(f"port: {port}\nlog_level: debug\nresource_pools:\n  - pool_name: big-gpus\n")
    up = cluster_up(
        det, data_dir, "--master-port", str(free_port()), "--master-config", str(config)
    )
    assert up.returncode == 0, up
    assert f"Master at http://localhost:{port}" in up.stdout
    assert "Cluster ready: 1 master, 1 agents" in up.stdout
    agents = det("agent", "list", master=port)
    assert agents.returncode == 0, agents
    assert "big-gpus" in agents.stdout
    # cluster-up's own settings are still there where FILE says nothing: its data directory.
    assert (data_dir / "master" / "admin-password").is_file()
    assert " DEBUG " in (data_dir / "master.log").read_text()


def test_a_master_alone_is_up_once_it_is_healthy(det: Det, data_dir: pathlib.Path) -> None:
    port = free_port()
    up = cluster_up(det, data_dir, "--master-port", str(port), "--agents", "0")
    assert up.returncode == 0, up
    assert "Cluster ready: 1 master, 0 agents" in up.stdout
    agents = det("agent", "list", master=port)
    assert agents.returncode == 0, agents
    assert "agent-" not in agents.stdout and not list(data_dir.glob("agent-*.log"))


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (None, "cannot read it (No such file or directory)"),
        ("port: [8080\n", "not valid YAML"),
        ("- port: 8080\n", "expected a mapping of master settings, not a list"),
        ("prot: 8080\n", "prot: unknown key"),
        ("db: {type: mysql}\n", "db.type: expected sqlite or postgres, not 'mysql'"),
        ("resource_pools: []\n", "resource_pools: expected a non-empty list of pools"),
    ],
)
def test_a_bad_config_file_is_one_line_naming_it_and_the_field(
    det: Det, data_dir: pathlib.Path, tmp_path: pathlib.Path, text: str | None, says: str
) -> None:
    config = tmp_path / "bad.yaml"
    if text is not None:
        config.write_text(text)
    up = cluster_up(
        det, data_dir, "--master-port", str(free_port()), "--master-config", str(config)
    )
    assert up.returncode == 1, up
    assert up.stderr.startswith(f"Error: --master-config {config}: {says}"), up.stderr
    assert up.stderr.count("\n") == 1, up.stderr
    # Nothing was started.
    assert not (data_dir / "cluster.json").exists()
    assert not (data_dir / "master.log").exists()
