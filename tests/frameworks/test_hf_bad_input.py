"""DetCallback refuses what cannot work, with Determined's messages: a searcher length that
disagrees with the Trainer's, validations without the searcher's metric, no cluster, and
no core context."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from tests.cluster import EXAMPLES, ROOT, Cluster
from tests.frameworks.conftest import skip_without_frameworks
from tests.integration.test_core_api import Api

skip_without_frameworks("transformers")

pytestmark = [pytest.mark.frameworks, pytest.mark.timeout(900)]

HF = EXAMPLES / "hf_trainer_api"


@pytest.fixture(scope="module")
def runs(cluster: Cluster) -> dict[str, int]:
    return {
        # The Trainer runs --max_steps 200; the searcher's time is in epochs.
        "units": cluster.create(
            HF / "adaptive.yaml",
            HF,
            *("--config", "searcher.time_metric=epochs", "--config", "searcher.max_time=2"),
            *("--config", "searcher.max_trials=1"),
        ),
        # The Trainer's evaluations hold eval_loss, not eval_accuracy.
        "metric": cluster.create(
            HF / "const.yaml", HF, "--config", "searcher.metric=eval_accuracy"
        ),
    }


def test_searcher_time_in_epochs_against_max_steps_is_refused(
    api: Api, runs: dict[str, int]
) -> None:
    exp_id = runs["units"]
    api.wait(exp_id, "ERROR", timeout=600)
    (trial,) = api.trials(exp_id)
    (line,) = api.logs(trial.id, search="ValueError: HF trainer units")
    assert (
        "HF trainer units does not match configured the max_time configured for adaptive_asha "
        "searcher (batches=200 != epochs=2).  Please update one of the searcher.max_time config "
        "field or the --max_steps to match the other."
    ) in line
    assert api.metrics(trial.id, "training") == [], "refused before training"


def test_validation_without_the_searcher_metric_fails_the_trial(
    api: Api, runs: dict[str, int]
) -> None:
    exp_id = runs["metric"]
    api.wait(exp_id, "ERROR", timeout=600)
    (trial,) = api.trials(exp_id)
    assert api.logs(
        trial.id,
        search=(
            "ValueError: Searcher metric 'eval_accuracy' set by searcher.metric config field is "
            "missing; you must emit that metric for features like hyperparameter search, "
            "checkpoint garbage collection, and selecting the best checkpoint to work."
        ),
    )
    # Training metrics up to the first evaluation (step 50) were reported; no validation.
    assert api.metrics(trial.id, "validation") == []


def test_detcallback_needs_a_cluster_and_a_core_context(tmp_path: object) -> None:
    script = textwrap.dedent(
        """
        import os, sys, transformers
        from determined.transformers import DetCallback

        args = transformers.TrainingArguments(output_dir=sys.argv[1], report_to="none")
        try:
            DetCallback(None, args)
        except RuntimeError as e:
            print("off-cluster:", e)
        # What a task sees, without calling det.core.init().
        os.environ.update(DET_ALLOCATION_ID="1.1.0", DET_TRIAL_ID="1", DET_MASTER="x:1")
        try:
            DetCallback(None, args)
        except TypeError as e:
            print("no core context:", e)
        """
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("DET_")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "harness"), str(ROOT)])
    out = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    ).stdout
    assert "off-cluster: det.transformers.DetCallback must be run on a Determined cluster" in out
    assert (
        "no core context: DetCallback(core_context, ...) takes the context that "
        "det.core.init() returns (with det.core.init() as core_context: ...), not NoneType"
    ) in out
