"""Elastic pools for real: a master whose pool's provider launches instances that become
hosts (network namespaces of tests/netns.py, booted by tests/cloud.py), where the
instance's own startup script starts a real det-agent that joins the master and runs
trials. The master listens on the network's bridge address, which every host reaches.
"""

from __future__ import annotations

import contextlib
import json
import pathlib
import textwrap
import time
from collections.abc import Iterator
from typing import Any

from tests.cluster import Cluster, running, wait_until
from tests.multihost.conftest import network  # noqa: F401  (the hosts' network)
from tests.netns import Network

TRAIN = """
import json, os, time
import determined as det

with det.core.init() as core:
    info = det.get_cluster_info()
    done = 0
    if info.latest_checkpoint:
        with core.checkpoint.restore_path(info.latest_checkpoint) as path:
            done = json.loads((path / "state.json").read_text())["steps"]
        print(f"resumed after step {done}", flush=True)
    for op in core.searcher.operations():
        while done < op.length:
            done += 1
            time.sleep(float(os.environ.get("STEP_SECONDS", "0.1")))
            core.train.report_training_metrics(steps_completed=done, metrics={"loss": 1.0 / done})
            with core.checkpoint.store_path({"steps_completed": done}) as (path, _):
                (path / "state.json").write_text(json.dumps({"steps": done}))
            op.report_progress(done)
            if core.preempt.should_preempt():
                raise SystemExit(0)
        op.report_completed(1.0 / done)
"""


def context(tmp_path: pathlib.Path) -> pathlib.Path:
    ctx = tmp_path / "context"
    ctx.mkdir(exist_ok=True)
    (ctx / "train.py").write_text(TRAIN)
    return ctx


def experiment(
    tmp_path: pathlib.Path,
    *,
    pool: str,
    trials: int = 1,
    steps: int = 3,
    step_seconds: float = 0.1,
    name: str = "elastic",
) -> pathlib.Path:
    """A grid of ``trials`` one-slot trials in ``pool``, each ``steps`` long."""
    path = tmp_path / f"{name}.yaml"
    values = ", ".join(str(v) for v in range(trials))
    path.write_text(
        textwrap.dedent(
            f"""
            name: {name}
            entrypoint: python3 train.py
            environment:
              environment_variables: [STEP_SECONDS={step_seconds}]
            hyperparameters:
              x: {{type: categorical, vals: [{values}]}}
            searcher: {{name: grid, metric: loss, max_length: {steps}}}
            max_restarts: 3
            resources: {{slots_per_trial: 1, resource_pool: {pool}}}
            """
        )
    )
    return path


def master_config(pool: str, provider: dict[str, Any]) -> str:
    """A master with a fixed default pool and one elastic pool."""
    return json.dumps(
        {"resource_pools": [{"pool_name": "default"}, {"pool_name": pool, "provider": provider}]}
    )


def elastic_cluster(tmp_path: pathlib.Path, net: Network, config: str) -> Cluster:
    """A master on the network's bridge address (not started)."""
    return Cluster(
        tmp_path / "cluster", master_config=config, listen=net.gateway, reconnect_timeout=3
    )


@contextlib.contextmanager
def up(c: Cluster) -> Iterator[Cluster]:
    """The master started; its logs printed if the body fails; every process stopped."""
    yield from running(c, lambda c: c.start_master())


def agents_response(c: Cluster) -> dict[str, Any]:
    result: dict[str, Any] = c.get("/api/v1/agents")
    return result


def instances(c: Cluster, pool: str) -> list[dict[str, Any]]:
    return [i for i in agents_response(c).get("instances", []) if i["resourcePool"] == pool]


def provisioner(c: Cluster, pool: str) -> dict[str, Any]:
    for p in agents_response(c).get("provisioners", []):
        if p["resourcePool"] == pool:
            return dict(p)
    raise AssertionError(f"no provisioner for pool {pool}")


def master_log(c: Cluster) -> str:
    return (c.root / "master.log").read_text(errors="replace")


def wait_log(c: Cluster, text: str, timeout: float) -> None:
    wait_until(lambda: text in master_log(c), timeout, f"{text!r} in the master's log")


def settle(seconds: float) -> None:
    time.sleep(seconds)
