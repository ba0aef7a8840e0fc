"""An experiment whose checkpoints live in S3 (moto on loopback), on a real master and two
agents that share no checkpoint directory: it checkpoints, is paused, resumes on the other
agent from the uploaded checkpoint, and its objects go with retention and deletion."""

from __future__ import annotations

import json
import pathlib
import re
import textwrap
from collections.abc import Iterator

import pytest

from determined.api.gen import v1
from tests.cluster import Cluster, running, wait_until
from tests.integration.test_core_api import Api
from tests.s3server import SECRET_KEY, S3Server

CONTEXT = pathlib.Path(__file__).parent / "contexts" / "preemptible"


@pytest.fixture
def two_agents(tmp_path: pathlib.Path) -> Iterator[Cluster]:
    def start(c: Cluster) -> None:
        c.start_master()
        c.start_agent("agent-0", slots=1)
        c.start_agent("agent-1", slots=1)

    yield from running(Cluster(tmp_path), start)


@pytest.mark.slow
def test_an_s3_experiment_resumes_elsewhere_and_its_objects_go_with_it(
    two_agents: Cluster, s3: S3Server, tmp_path: pathlib.Path
) -> None:
    c = two_agents
    bucket = s3.bucket()
    storage = s3.storage(bucket, prefix="exps", save_trial_best=0, save_trial_latest=1)
    config = tmp_path / "s3.yaml"
    config.write_text(
        textwrap.dedent(
            f"""\
            name: s3
            entrypoint: python3 train.py
            searcher: {{name: single, metric: step, max_length: 12}}
            max_restarts: 0
            checkpoint_storage: {json.dumps(storage)}
            """
        )
    )
    exp = c.create(config, CONTEXT)
    trial = wait_until(lambda: c.trials(exp), 60, "a trial")[0]["id"]
    wait_until(lambda: len(s3.objects(bucket)) >= 4, 60, "two checkpoints in the bucket")
    c.det("experiment", "pause", str(exp))
    c.wait_state(exp, "PAUSED", timeout=60)
    logs = c.logs(trial)
    first = re.search(r"running on (agent-\d)", logs)
    paused = re.search(r"preempted at step (\d+)", logs)
    assert first and paused, logs
    # The agent that ran it leaves: the trial can only resume on the other one, which has
    # never seen a file of this experiment.
    c.stop_agent(first[1])
    c.det("experiment", "activate", str(exp))
    assert c.wait_state(exp, "COMPLETED", "ERROR", timeout=120) == "COMPLETED", c.logs(trial)
    logs = c.logs(trial)
    other = "agent-1" if first[1] == "agent-0" else "agent-0"
    assert f"running on {other}" in logs
    assert f"resumed at step {paused[1]}" in logs

    # Retention keeps the latest checkpoint only: its objects are all that is left, and
    # they are what its record lists.
    api = Api(c)

    def live() -> list[v1.Checkpoint]:
        return [x for x in api.checkpoints(trial) if x.state != v1.CheckpointState.DELETED]

    def checkpoint_objects() -> dict[str, int]:
        # The trial's TensorBoard files (AUTO mode) live beside its checkpoints.
        return {k: v for k, v in s3.objects(bucket).items() if "/tensorboard/" not in k}

    def only_latest_left() -> bool:
        kept = live()
        objects = checkpoint_objects()
        return len(kept) == 1 and {k.split("/")[1] for k in objects} == {kept[0].uuid}

    wait_until(only_latest_left, 60, "retention to delete all but the latest checkpoint")
    [kept] = live()
    assert kept.steps_completed == 12
    base = f"exps/{kept.uuid}/"
    objects = {k.removeprefix(base): v for k, v in checkpoint_objects().items()}
    assert dict(kept.resources) == objects
    assert any(f"/tensorboard/experiment/{exp}/trial/{trial}/" in k for k in s3.objects(bucket))
    assert objects["step"] == 2

    # The secret key is in no log and in no config the master shows.
    assert SECRET_KEY not in logs
    for daemon_log in c.root.glob("*.log"):
        assert SECRET_KEY not in daemon_log.read_text(errors="replace"), daemon_log.name
    assert SECRET_KEY not in json.dumps(c.experiment(exp))
    assert SECRET_KEY not in c.det("experiment", "config", str(exp)).stdout

    c.det("experiment", "delete", str(exp), "--yes")
    wait_until(lambda: s3.objects(bucket) == {}, 60, "the experiment's objects to be deleted")
