"""Log policies act on a real cluster of two agents: a matching line labels the trial,
cancels its retries, or keeps its restart off the agent where it matched."""

from __future__ import annotations

import json
import pathlib
import signal
import time
from collections.abc import Iterator

import pytest

from tests.cluster import Cluster, cluster_fixture, wait_until
from tests.integration.test_experiment_life import make_context

SCRIPT = """
import os, sys
run = int(os.environ["DET_TRIAL_RUN_ID"])
print("run", run, "on", os.environ["DET_AGENT_ID"], flush=True)
if run == 1:
    print(sys.argv[1], flush=True)
    raise SystemExit(1)
"""


@pytest.fixture
def two_agents(tmp_path: pathlib.Path) -> Iterator[Cluster]:
    yield from cluster_fixture(tmp_path, agents=2)


def _config(
    log_policies: str, *, entrypoint: str = "python3 train.py", restarts: int | None = None
) -> str:
    """The tests' experiment config: one trial of ``entrypoint`` with these log policies (a
    YAML list) and, when given, ``max_restarts``."""
    restarts_line = "" if restarts is None else f"max_restarts: {restarts}\n"
    return (
        f"entrypoint: {entrypoint}\n"
        "searcher: {name: single, metric: x, max_length: 1}\n"
        f"{restarts_line}log_policies: {log_policies}\n"
    )


def _run(c: Cluster, tmp_path: pathlib.Path, line: str, policies: str, restarts: int = 2) -> int:
    entrypoint = f'["python3", "train.py", {json.dumps(line)}]'
    config = _config(policies, entrypoint=entrypoint, restarts=restarts)
    cfg, ctx = make_context(tmp_path, SCRIPT, config)
    return c.create(cfg, ctx)


def test_a_matching_line_labels_the_trial_with_its_signal(
    two_agents: Cluster, tmp_path: pathlib.Path
) -> None:
    exp_id = _run(
        two_agents,
        tmp_path,
        "RuntimeError: CUDA out of memory. Tried to allocate 2 GiB",
        "[{name: OOM, pattern: 'CUDA out of memory', actions: [{signal: gpu_oom}]}]",
    )
    assert two_agents.wait_state(exp_id, "COMPLETED", "ERROR") == "COMPLETED"
    (trial,) = two_agents.trials(exp_id)
    assert trial["log_policy_matched"] == "gpu_oom"
    assert "gpu_oom" in two_agents.det("experiment", "list-trials", str(exp_id)).stdout
    described = two_agents.det("trial", "describe", str(trial["id"])).stdout
    assert "Log Signal" in described and "gpu_oom" in described


def test_determineds_default_policies_label_a_cuda_oom_with_no_policy_configured(
    two_agents: Cluster, tmp_path: pathlib.Path
) -> None:
    exp_id = _run(two_agents, tmp_path, "RuntimeError: CUDA out of memory. Tried 2 GiB", "[]", 0)
    assert two_agents.wait_state(exp_id, "COMPLETED", "ERROR") == "ERROR"
    (trial,) = two_agents.trials(exp_id)
    assert trial["log_policy_matched"] == "CUDA OOM"


def test_cancel_retries_makes_a_matching_failure_final(
    two_agents: Cluster, tmp_path: pathlib.Path
) -> None:
    exp_id = _run(
        two_agents,
        tmp_path,
        "fatal: corrupt shard 17",
        "[{pattern: 'corrupt shard [0-9]+', actions: [cancel_retries]}]",
    )
    assert two_agents.wait_state(exp_id, "COMPLETED", "ERROR") == "ERROR"
    (trial,) = two_agents.trials(exp_id)
    logs = two_agents.logs(trial["id"])
    assert "run 1" in logs and "run 2" not in logs
    assert "matched a log policy with cancel_retries" in logs
    assert trial["log_policy_matched"] is None


def test_exclude_node_restarts_the_trial_on_another_agent(
    two_agents: Cluster, tmp_path: pathlib.Path
) -> None:
    exp_id = _run(
        two_agents,
        tmp_path,
        "NCCL error: unhandled system error on this node",
        "[{name: bad node, pattern: '^NCCL error', actions: [exclude_node]}]",
    )
    assert two_agents.wait_state(exp_id, "COMPLETED", "ERROR") == "COMPLETED"
    (trial,) = two_agents.trials(exp_id)
    runs = [
        line.split() for line in two_agents.logs(trial["id"]).splitlines() if " on agent-" in line
    ]
    agents = [words[-1] for words in runs if "run" in words]
    assert len(agents) == 2 and agents[0] != agents[1], runs
    assert trial["log_policy_matched"] == "bad node"


def test_a_pattern_re2_cannot_run_is_refused_with_its_field(
    two_agents: Cluster, tmp_path: pathlib.Path
) -> None:
    cfg, ctx = make_context(
        tmp_path,
        "print('hi')",
        _config("[{pattern: 'loss=nan(?= at step)', actions: [cancel_retries]}]"),
    )
    out = two_agents.det("experiment", "create", str(cfg), str(ctx), check=False)
    assert out.returncode == 1, out
    assert "log_policies[0].pattern" in out.stderr and "RE2" in out.stderr
    assert "Traceback" not in out.stderr


def test_canceled_retries_survive_a_master_restart_during_the_run(
    two_agents: Cluster, tmp_path: pathlib.Path
) -> None:
    go = tmp_path / "go"
    cfg, ctx = make_context(
        tmp_path,
        f"""
        import os, pathlib, time
        print("run", os.environ["DET_TRIAL_RUN_ID"], flush=True)
        print("fatal: corrupt shard 3", flush=True)
        for _ in range(600):
            if pathlib.Path({str(go)!r}).exists():
                break
            time.sleep(0.1)
        raise SystemExit(1)
        """,
        _config("[{pattern: 'corrupt shard', actions: [cancel_retries]}]", restarts=2),
    )
    exp_id = two_agents.create(cfg, ctx)
    trial_id = wait_until(lambda: two_agents.trials(exp_id), 30, "a trial")[0]["id"]
    wait_until(lambda: "corrupt shard" in two_agents.logs(trial_id), 60, "the matching line")
    two_agents.stop_master(signal.SIGKILL)
    time.sleep(1.0)
    two_agents.start_master()
    go.touch()
    assert two_agents.wait_state(exp_id, "COMPLETED", "ERROR", timeout=90) == "ERROR"
    logs = two_agents.logs(trial_id)
    assert "run 1" in logs and "run 2" not in logs
