"""A master whose only pool is a Slurm one is one command: `det deploy local cluster-up
--master-config FILE --agents 0`, on the real test cluster."""

from __future__ import annotations

import pathlib
import textwrap

import pytest

from tests.cluster import EXAMPLES, free_port
from tests.integration.test_deploy_local import Det, cluster_up, data_dir, det
from tests.slurm.conftest import CPUS, SlurmCluster

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

__all__ = ["data_dir", "det"]  # the fixtures this module uses


@pytest.fixture
def slurm_conf(slurm: SlurmCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    """The master that cluster-up starts inherits SLURM_CONF from `det`'s environment."""
    monkeypatch.setenv("SLURM_CONF", slurm.env["SLURM_CONF"])


# slurm_conf comes first: `det` copies the environment when it is set up.
def test_cluster_up_with_only_a_slurm_pool_runs_an_experiment(
    slurm_conf: None, det: Det, data_dir: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    config = tmp_path / "master.yaml"
    config.write_text(
        textwrap.dedent(
            f"""\
            resource_pools:
              - pool_name: slurm
                type: slurm
                partition: pydet
                slots_per_node: {CPUS}
                time_limit: 10
                job_storage_root: {tmp_path / "jobs"}
            """
        )
    )
    port = free_port()
    up = cluster_up(
        det, data_dir, "--master-port", str(port), "--agents", "0", "--master-config", str(config)
    )
    assert up.returncode == 0, up
    assert "Cluster ready: 1 master, 0 agents" in up.stdout
    core_api = EXAMPLES / "core_api"
    run = det(
        "experiment", "create", "-f", str(core_api / "1_metrics.yaml"), str(core_api), master=port
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "submitted as Slurm job" in run.stdout
