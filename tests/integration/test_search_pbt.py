"""Population-based training on a real cluster: children start from their parents'
checkpoints (the script proves it by what it loads), the lineage shows in the CLI, and code
that never checkpoints fails the experiment with the trial named. The cluster is
test_search's: two agents with two slots each."""

from __future__ import annotations

import json
import pathlib
import re
from typing import Any

import pytest

from tests.cluster import Cluster
from tests.integration.test_search import TERMINAL, kill_master_mid_search, make_context
from tests.integration.test_search import cluster as cluster  # the module's two agents

SCRIPT = """
    import json
    import time
    import determined as det
    from determined import core

    info = det.get_cluster_info()
    x = info.trial.hparams["x"]
    steps, trained_by = 0, []
    with core.init() as ctx:
        if info.latest_checkpoint:
            with ctx.checkpoint.restore_path(info.latest_checkpoint) as path:
                state = json.loads((path / "state.json").read_text())
            steps, trained_by = state["steps"], state["trained_by"]
            # The master says where to start; the checkpoint must agree.
            assert steps == info.trial.steps_completed, (steps, info.trial.steps_completed)
            print(f"loaded {info.latest_checkpoint} at {steps} from trial {trained_by[-1]}")
        for op in ctx.searcher.operations():
            for step in range(steps + 1, op.length + 1):
                time.sleep(PAUSE)
                ctx.train.report_training_metrics(step, {"loss": abs(x - 0.7)})
            steps = op.length
            loss = abs(x - 0.7) + 1 / steps
            ctx.train.report_validation_metrics(steps, {"loss": loss})
            if CHECKPOINTS:
                meta = {"steps_completed": steps}
                with ctx.checkpoint.store_path(meta) as (path, uuid):
                    state = {"steps": steps, "trained_by": trained_by + [info.trial.trial_id]}
                    (path / "state.json").write_text(json.dumps(state))
            op.report_completed(loss)
"""
CONFIG = """
    entrypoint: python3 train.py
    hyperparameters:
      x: {type: double, minval: 0, maxval: 1}
      group: {opt: {type: categorical, vals: [sgd, adam]}, const: 3}
    searcher:
      name: pbt
      metric: loss
      population_size: 3
      num_rounds: 3
      length_per_round: {batches: 2}
      replace_function: {truncate_fraction: 0.34}
      explore_function: {resample_probability: 0.2, perturb_factor: 0.2}
    max_restarts: 0
    reproducibility: {experiment_seed: 11}
"""


def script(*, checkpoints: bool = True, pause: float = 0.0) -> str:
    return SCRIPT.replace("CHECKPOINTS", str(checkpoints)).replace("PAUSE", str(pause))


def run_pbt(
    cluster: Cluster, tmp_path: pathlib.Path, *, checkpoints: bool, restart: bool = False
) -> tuple[int, str, dict[int, dict[str, Any]]]:
    """The search over SCRIPT, with or without checkpoints, to its end (with ``restart``,
    across a master killed mid-search): its id, final state and trials by id."""
    pause = 1.0 if restart else 0.0
    cfg = make_context(tmp_path, "pbt", script(checkpoints=checkpoints, pause=pause), CONFIG)
    exp_id = cluster.create(cfg, cfg.parent / "pbt")
    if restart:
        # Once the first round is decided (its worst trial closed), while later ones run.
        kill_master_mid_search(cluster, exp_id, done=1, total=6, timeout=120)
    state = cluster.wait_state(exp_id, *TERMINAL, timeout=240)
    return exp_id, state, {t["id"]: t for t in cluster.trials(exp_id)}


@pytest.mark.slow
@pytest.mark.parametrize("restart", [False, True], ids=["", "master-restart"])
def test_pbt_children_start_from_their_parents_checkpoints(
    cluster: Cluster, tmp_path: pathlib.Path, restart: bool
) -> None:
    exp_id, state, trials = run_pbt(cluster, tmp_path, checkpoints=True, restart=restart)
    assert state == "COMPLETED", trials
    # 3 trials, then one child in each of the two rounds after the first.
    assert len(trials) == 5
    assert all(t["state"] == "COMPLETED" for t in trials.values()), trials
    children = [t for t in trials.values() if t["parent_trial_id"] is not None]
    assert len(children) == 2
    for child in children:
        parent = trials[child["parent_trial_id"]]
        uuid = child["warm_start_checkpoint_uuid"]
        assert uuid and parent["id"] < child["id"]
        # The child's first run loaded its parent's checkpoint, at the round it forked.
        logs = cluster.logs(child["id"])
        loaded = re.findall(r"loaded (\S+) at (\d+) from trial (\d+)", logs)
        assert loaded[0][0] == uuid and int(loaded[0][2]) == parent["id"], loaded
        assert int(loaded[0][1]) in (2, 4)
        assert f"starts from trial {parent['id']}'s checkpoint {uuid} (step {loaded[0][1]})" in logs
        assert "older than" not in logs
        hparams, parent_hparams = child["hparams"], parent["hparams"]
        assert hparams["group"]["const"] == 3 and 0 <= hparams["x"] <= 1
        assert parent_hparams["group"]["const"] == 3
        described = json.loads(cluster.det("trial", "describe", str(child["id"]), "--json").stdout)
        assert described["trial"]["parent_trial_id"] == parent["id"]
        text = cluster.det("trial", "describe", str(child["id"])).stdout
        assert "Parent Trial" in text
    lineage = cluster.det("experiment", "describe", str(exp_id)).stdout.split("Lineage")[1]
    for child in children:
        assert f"trial {child['id']} <- trial {child['parent_trial_id']}" in lineage
    # Every trial that lived to the end trained all three rounds' length.
    assert sorted(t["total_batches_processed"] for t in trials.values()).count(6) == 3


@pytest.mark.slow
def test_pbt_over_code_without_checkpoints_fails_naming_the_trial(
    cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    _, state, trials = run_pbt(cluster, tmp_path, checkpoints=False)
    assert state == "ERROR"
    assert len(trials) == 3 and not any(t["parent_trial_id"] for t in trials.values())
    # Nothing trained past the first round once the search could not go on.
    assert all(t["total_batches_processed"] <= 2 for t in trials.values()), trials
    named = [
        t["id"]
        for t in trials.values()
        if f"trial {t['id']} has no checkpoint for the pbt searcher" in cluster.logs(t["id"])
    ]
    assert len(named) == 1, [cluster.logs(t) for t in trials]


def test_preview_search_shows_a_pbt_search_s_rounds(
    cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    cfg = make_context(tmp_path, "preview", script(), CONFIG)
    out = cluster.det("preview-search", str(cfg)).stdout
    assert "This search will create a total of 5 trial(s)." in out
    assert "At most 3 trial(s) run at a time." in out
    assert "3 round(s) of 2 batches for a population of 3; after each round but the last" in out
    rows = [line.split("|") for line in out.splitlines() if line.count("|") == 1]
    assert [[int(c) for c in row] for row in rows[1:]] == [[1, 2], [1, 4], [3, 6]]
    bad = cluster.det(
        "experiment",
        "create",
        str(cfg),
        str(cfg.parent / "preview"),
        "--config",
        "searcher.replace_function.truncate_fraction=0.7",
        check=False,
    )
    assert bad.returncode == 1 and "Traceback" not in bad.stderr
    assert "searcher.replace_function.truncate_fraction: must be in (0, 0.5], got 0.7" in bad.stderr
