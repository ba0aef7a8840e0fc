"""A master with a Slurm resource pool runs trials as Slurm jobs on the real test cluster.

No agent runs: the master's Slurm pool (master/slurm/pool.py) turns each allocation into
one batch job on the one-node cluster of scripts/slurm, and the trial's lifecycle, logs,
restarts and the master's own restart go through it.
"""

from __future__ import annotations

import json
import pathlib
import textwrap
from collections.abc import Iterator

import pytest

from tests.cluster import EXAMPLES, Cluster, running
from tests.slurm.conftest import CPUS, SlurmCluster

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

CORE_API = EXAMPLES / "core_api"


def pool_config(jobs: pathlib.Path, partition: str = "pydet") -> str:
    return textwrap.dedent(
        f"""\
        resource_pools:
          - pool_name: slurm
            type: slurm
            partition: {partition}
            slots_per_node: {CPUS}
            sbatch_args: ["--time=00:10:00"]
            job_storage_root: {jobs}
        """
    )


@pytest.fixture
def master(
    slurm: SlurmCluster, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Cluster]:
    monkeypatch.setenv("SLURM_CONF", slurm.env["SLURM_CONF"])
    cluster = Cluster(tmp_path, master_config=pool_config(tmp_path / "jobs"))
    yield from running(cluster, Cluster.start_master)


def write_config(where: pathlib.Path, text: str) -> pathlib.Path:
    path = where / "exp.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def slurm_jobs(slurm: SlurmCluster) -> list[str]:
    """Every pydet job Slurm still lists: ``id|name|state``."""
    out = slurm.run("squeue", "-h", "-t", "all", "-o", "%i|%j|%T").stdout.split()
    return [line for line in out if "|pydet-" in line]


def test_a_single_slot_trial_completes_with_metrics_and_logs(
    master: Cluster, slurm: SlurmCluster, tmp_path: pathlib.Path
) -> None:
    exp = master.create(CORE_API / "1_metrics.yaml", CORE_API)
    assert master.wait_state(exp, "COMPLETED", "ERROR", timeout=120) == "COMPLETED"
    trial = master.trials(exp)[0]
    logs = master.logs(trial["id"])
    assert "submitted as Slurm job" in logs
    assert "x is now 100" in logs
    described = json.loads(master.det("trial", "describe", str(trial["id"]), "--json").stdout)
    assert described["trial"]["best_validation_metric"] == 100
    reports = described["workloads"]
    assert [m["steps_completed"] for m in reports if m["group"] == "training"] == list(
        range(10, 101, 10)
    )
    (job,) = slurm_jobs(slurm)
    assert job.endswith("|COMPLETED")
