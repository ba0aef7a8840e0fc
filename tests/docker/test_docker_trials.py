"""Trials in Docker containers: a real master and docker-runtime agents as processes."""

from __future__ import annotations

import pathlib
import signal
import textwrap

import pytest

from tests.cluster import Cluster, free_port, wait_until
from tests.docker.conftest import BASE_IMAGE, containers, ended, labels, no_containers_left

pytestmark = [pytest.mark.docker, pytest.mark.timeout(600)]


def make_context(
    tmp_path: pathlib.Path, files: dict[str, str], config: str
) -> tuple[pathlib.Path, pathlib.Path]:
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    for name, text in files.items():
        (ctx / name).write_text(textwrap.dedent(text))
    cfg = tmp_path / "config.yaml"
    cfg.write_text(textwrap.dedent(config))
    return cfg, ctx


TRAIN = """
    import logging, os, pathlib, sys
    import determined as det

    print("in a container:", os.path.exists("/.dockerenv"), flush=True)
    print("working dir:", os.getcwd(), sorted(os.listdir(".")), flush=True)
    print("harness from:", det.__file__, flush=True)
    print("to stderr", file=sys.stderr, flush=True)
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
    with det.core.init() as core:
        core.train.report_training_metrics(steps_completed=1, metrics={"loss": 0.5})
        with core.checkpoint.store_path({"steps_completed": 1}) as (path, uuid):
            (path / "weights").write_text("42")
        core.train.report_validation_metrics(steps_completed=1, metrics={"loss": 0.25})
    print("trained", flush=True)
"""


def test_trial_runs_in_a_container_to_completion_with_its_logs(
    docker_cluster: Cluster, tmp_path: pathlib.Path, agent_ids: list[str]
) -> None:
    agent = agent_ids[0]
    docker_cluster.start_agent(agent, runtime="docker")
    cfg, ctx = make_context(
        tmp_path,
        {"train.py": TRAIN, "startup-hook.sh": "echo hook ran in $(pwd)\n"},
        """
        entrypoint: python3 train.py
        searcher: {name: single, metric: loss, max_length: 1}
        max_restarts: 0
        """,
    )
    exp_id = docker_cluster.create(cfg, ctx)
    _, logs = ended(docker_cluster, exp_id)
    assert "in a container: True" in logs
    assert "hook ran in /run/determined/workdir" in logs
    assert "working dir: /run/determined/workdir ['startup-hook.sh', 'train.py']" in logs
    # The default image has the harness installed; it is used, not the host's.
    assert "harness from: /opt/pydet/" in logs
    assert "to stderr" in logs
    assert "trained" in logs
    # The checkpoint went through the shared_fs mount to the master's storage on the host.
    weights = list((tmp_path / "master").rglob("weights"))
    assert [w.read_text() for w in weights] == ["42"]
    no_containers_left(agent)
    # Its working directory went with it.
    assert [p.name for p in (tmp_path / agent).iterdir() if not p.name.startswith(".")] == []


def test_image_without_the_harness_gets_it_mounted(
    docker_cluster: Cluster, tmp_path: pathlib.Path, agent_ids: list[str]
) -> None:
    docker_cluster.start_agent(agent_ids[0], runtime="docker")
    cfg, ctx = make_context(
        tmp_path,
        {"train.py": TRAIN},
        f"""
        entrypoint: python3 train.py
        environment: {{image: "{BASE_IMAGE}"}}
        searcher: {{name: single, metric: loss, max_length: 1}}
        max_restarts: 0
        """,
    )
    exp_id = docker_cluster.create(cfg, ctx)
    _, logs = ended(docker_cluster, exp_id)
    assert "harness from: /run/determined/pylib/determined/__init__.py" in logs
    assert "trained" in logs


def test_missing_image_fails_the_trial_with_a_clear_error(
    docker_cluster: Cluster, tmp_path: pathlib.Path, agent_ids: list[str]
) -> None:
    docker_cluster.start_agent(agent_ids[0], runtime="docker")
    cfg, ctx = make_context(
        tmp_path,
        {"train.py": "print('never')\n"},
        """
        entrypoint: python3 train.py
        environment: {image: "pydet-no-such-image:1"}
        searcher: {name: single, metric: loss, max_length: 1}
        max_restarts: 0
        """,
    )
    exp_id = docker_cluster.create(cfg, ctx)
    _, logs = ended(docker_cluster, exp_id, "ERROR")
    assert "image pydet-no-such-image:1 is not present and could not be pulled" in logs
    assert "never" not in logs
    # The agent told the master it pulls the image (the trial was shown PULLING meanwhile).
    master_log = (docker_cluster.root / "master.log").read_text()
    assert f"agent {agent_ids[0]} pulls image pydet-no-such-image:1" in master_log


RENDEZVOUS = """
    import json, os, socket, sys, time

    addrs = json.loads(os.environ["DET_CONTAINER_ADDRS"])
    rank = int(os.environ["DET_CONTAINER_RANK"])
    port = json.loads(os.environ["DET_HPARAMS"])["port"]
    me = f"rank {rank} of {len(addrs)} on agent {os.environ['DET_AGENT_ID']}"
    print(f"{me}: in a container: {os.path.exists('/.dockerenv')}, addrs {addrs}", flush=True)
    if rank == 0:
        with socket.create_server((addrs[0], port)) as server:
            server.settimeout(60)
            conn, _ = server.accept()
            with conn:
                peer = conn.recv(1024).decode()
                conn.sendall(f"hello from {me}".encode())
        print(f"{me}: heard '{peer}'", flush=True)
    else:
        deadline = time.monotonic() + 60
        while True:
            try:
                conn = socket.create_connection((addrs[0], port), timeout=5)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        with conn:
            conn.sendall(f"hello from {me}".encode())
            print(f"{me}: heard '{conn.recv(1024).decode()}'", flush=True)
"""


def test_two_container_trial_spans_two_agents_on_host_networking(
    docker_cluster: Cluster, tmp_path: pathlib.Path, agent_ids: list[str]
) -> None:
    for agent in agent_ids:
        docker_cluster.start_agent(agent, runtime="docker")
    port = free_port()
    cfg, ctx = make_context(
        tmp_path,
        {"rendezvous.py": RENDEZVOUS},
        f"""
        entrypoint: >-
          python3 -m determined.launch.wrap_rank DET_CONTAINER_RANK
          python3 rendezvous.py
        hyperparameters: {{port: {port}}}
        searcher: {{name: single, metric: loss, max_length: 1}}
        resources: {{slots_per_trial: 2}}
        max_restarts: 0
        """,
    )
    exp_id = docker_cluster.create(cfg, ctx)
    _, logs = ended(docker_cluster, exp_id)
    a0, a1 = sorted(agent_ids)
    ranks = {}
    for line in logs.splitlines():
        if "in a container: True" in line and "[rank=" in line:
            ranks[line.split("[rank=")[1][0]] = line
    assert set(ranks) == {"0", "1"}, logs
    assert "addrs ['127.0.0.1', '127.0.0.1']" in ranks["0"]
    # Each rank ran on its own agent, so in its own container, and each heard the other.
    assert {a0, a1} == {line.split("on agent ")[1].split(":")[0] for line in ranks.values()}
    assert "[rank=0] rank 0 of 2" in logs and "heard 'hello from rank 1 of 2" in logs
    assert "[rank=1] rank 1 of 2" in logs and "heard 'hello from rank 0 of 2" in logs
    no_containers_left(*agent_ids)


SLEEPER = """
    import signal, sys, time
    print("started", flush=True)
    time.sleep(600)
"""


def test_kill_stops_the_container_and_removes_it(
    docker_cluster: Cluster, tmp_path: pathlib.Path, agent_ids: list[str]
) -> None:
    agent = agent_ids[0]
    docker_cluster.start_agent(agent, runtime="docker")
    cfg, ctx = make_context(
        tmp_path,
        {"train.py": SLEEPER},
        """
        entrypoint: python3 train.py
        searcher: {name: single, metric: loss, max_length: 1}
        max_restarts: 0
        """,
    )
    exp_id = docker_cluster.create(cfg, ctx)
    trial_id = wait_until(
        lambda: (ts := docker_cluster.trials(exp_id)) and ts[0]["id"], 60, "the trial"
    )
    wait_until(lambda: "started" in docker_cluster.logs(trial_id), 60, "the trial to start")
    (running,) = containers(agent)
    assert running["State"] == "running"
    docker_cluster.det("experiment", "kill", str(exp_id))
    assert docker_cluster.wait_state(exp_id, "CANCELED", "ERROR", "COMPLETED", timeout=60) == (
        "CANCELED"
    )
    no_containers_left(agent)
    assert not (tmp_path / agent / labels(running)["ai.pydet.container"]).exists()


TICKER = """
    import time
    for i in range(1, 31):
        print(f"tick {i}", flush=True)
        time.sleep(0.25)
    print("finished", flush=True)
"""


def test_restarted_agent_adopts_its_running_container(
    docker_cluster: Cluster, tmp_path: pathlib.Path, agent_ids: list[str]
) -> None:
    agent = agent_ids[0]
    docker_cluster.start_agent(agent, runtime="docker")
    cfg, ctx = make_context(
        tmp_path,
        {"train.py": TICKER},
        """
        entrypoint: python3 train.py
        searcher: {name: single, metric: loss, max_length: 1}
        max_restarts: 0
        """,
    )
    exp_id = docker_cluster.create(cfg, ctx)
    trial_id = wait_until(
        lambda: (ts := docker_cluster.trials(exp_id)) and ts[0]["id"], 60, "the trial"
    )
    wait_until(lambda: "tick 4" in docker_cluster.logs(trial_id), 60, "the trial to tick")
    docker_cluster.stop_agent(agent, signal.SIGKILL)
    (orphan,) = containers(agent)
    assert orphan["State"] == "running"  # killing the agent does not kill its task
    docker_cluster.start_agent(agent, runtime="docker")
    _, logs = ended(docker_cluster, exp_id)
    (trial,) = docker_cluster.trials(exp_id)
    assert trial["restarts"] == 0  # the same container finished the trial
    assert "finished" in logs
    # Lines printed while no agent was listening were picked up from the engine's log.
    ticks = [line for line in logs.splitlines() if "tick " in line]
    numbers = [int(line.rsplit("tick ", 1)[1]) for line in ticks]
    assert sorted(set(numbers)) == list(range(1, 31)), logs
    # ... and lines handed on before the restart mostly were not handed on again.
    assert len(numbers) <= 31, logs
    assert orphan["ID"] not in {c["ID"] for c in containers(agent)}
    no_containers_left(agent)
