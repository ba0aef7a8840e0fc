"""Keras 3 with ``determined.keras.DeterminedCallback`` (examples/keras_digits) on a real
cluster.

TensorFlow lives in ``.venv-keras`` (``scripts/frameworks/keras-venv.sh``), not in pydet's
``.venv``: the cluster's agent runs with that interpreter, so its tasks' ``python3`` has
TensorFlow and pydet. Without that environment the tests are skipped, saying how to make it.
"""

from __future__ import annotations

import os
import pathlib
import pickle
import re
from collections.abc import Iterator

import pytest

from tests.cluster import EXAMPLES, ROOT, Cluster, running
from tests.frameworks.foreign import pytorch_trial_checkpoint
from tests.integration.test_core_api import Api, checkpoint_dir
from tests.integration.test_digits import wait_trial

EXAMPLE = EXAMPLES / "keras_digits"
KERAS_PYTHON = pathlib.Path(
    os.environ.get("PYDET_KERAS_PYTHON") or ROOT / ".venv-keras" / "bin" / "python"
)

pytestmark = [
    pytest.mark.frameworks,
    pytest.mark.timeout(600),
    pytest.mark.skipif(
        not KERAS_PYTHON.exists(),
        reason=f"no {KERAS_PYTHON}: run scripts/frameworks/keras-venv.sh",
    ),
]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    def start(c: Cluster) -> None:
        c.agent_python = str(KERAS_PYTHON)
        c.start_master()
        c.start_agent("agent-0", slots=3)

    yield from running(Cluster(tmp_path_factory.mktemp("keras")), start)


@pytest.fixture(scope="module")
def api(cluster: Cluster) -> Api:
    return Api(cluster)


def test_keras_example_reports_checkpoints_and_writes_tensorboard(
    cluster: Cluster, api: Api
) -> None:
    exp_id = cluster.create(EXAMPLE / "const.yaml", EXAMPLE)
    api.wait(exp_id, "COMPLETED", timeout=500)
    (trial,) = api.trials(exp_id)
    # 1,437 training images in batches of 32: 45 batches an epoch, 5 epochs.
    validations = api.metrics(trial.id, "validation")
    assert [s for s, _ in validations] == [45, 90, 135, 180, 225]
    assert [m["epochs"] for _, m in validations] == [1, 2, 3, 4, 5]
    assert validations[-1][1]["accuracy"] > 0.9
    # Validation metrics are Keras' evaluation logs; training metrics never carry val_*.
    training = api.metrics(trial.id, "training")
    assert [s for s, _ in training] == [45, 90, 135, 180, 225]
    assert all(not k.startswith("val_") for _, m in training for k in m)
    ckpts = api.checkpoints(trial.id)
    assert [c.steps_completed for c in ckpts] == [45, 90, 135, 180, 225]
    latest = checkpoint_dir(ckpts[-1])
    assert (latest / "model_checkpoint.weights.h5").is_file()
    state = pickle.loads((latest / "callback_state").read_bytes())
    assert state["epoch"] == 4 and state["steps_completed"] == 225
    assert state["continue_id"] == trial.id
    # det.keras.TensorBoard wrote where the trial's TensorBoard files are uploaded.
    storage = latest.parent
    uploaded = list(
        storage.glob(f"*/tensorboard/experiment/{exp_id}/trial/{trial.id}/**/*tfevents*")
    )
    assert any("train" in p.parts for p in uploaded), uploaded
    assert any("validation" in p.parts for p in uploaded), uploaded


def test_paused_keras_trial_resumes_at_the_next_epoch(cluster: Cluster, api: Api) -> None:
    exp_id = cluster.create(
        EXAMPLE / "const.yaml",
        EXAMPLE,
        # 20 epochs of 180 batches of 8: long enough to pause in the middle.
        "--config",
        "entrypoint=python3 -m determined.launch.tensorflow -- python3 train.py --epochs 20",
        "--config",
        "hyperparameters.global_batch_size=8",
        "--config",
        "preemption_timeout=600",
    )
    trial = api.first_trial(exp_id)
    api.wait_for_log(trial.id, "saved after epoch 0", timeout=400)
    cluster.det("experiment", "pause", str(exp_id))
    wait_trial(api, trial.id, "PAUSED")
    paused_at = api.trial(trial.id).total_batches_processed
    assert paused_at % 180 == 0 and 180 <= paused_at < 20 * 180, paused_at
    assert api.checkpoints(trial.id)[-1].steps_completed == paused_at
    epoch = paused_at // 180

    cluster.det("experiment", "activate", str(exp_id))
    api.wait(exp_id, "COMPLETED", timeout=500)
    line = api.wait_for_log(trial.id, "continuing at epoch")
    assert re.search(rf"continuing at epoch {epoch} \(batch {paused_at}\)", line), line
    steps = [s for s, _ in api.metrics(trial.id, "training")]
    # Every epoch reported once: the second run started after the saved epoch.
    assert steps == [180 * e for e in range(1, 21)]
    assert [m["epochs"] for _, m in api.metrics(trial.id, "validation")] == list(range(1, 21))


def test_checkpoint_of_another_framework_fails_the_trial_naming_it(
    cluster: Cluster, api: Api
) -> None:
    foreign = pytorch_trial_checkpoint(cluster, api)

    exp_id = cluster.create(
        EXAMPLE / "const.yaml", EXAMPLE, "--config", f"searcher.source_checkpoint_uuid={foreign}"
    )
    api.wait(exp_id, "ERROR", timeout=400)
    (trial,) = api.trials(exp_id)
    (line,) = api.logs(
        trial.id, search=f"checkpoint {foreign} cannot be loaded into this Keras model"
    )
    assert "state_dict.pth" in line and "no model_checkpoint.weights.h5" in line, line
    assert not api.metrics(trial.id, "training")
