"""Determined's Core API walkthrough (examples/core_api) runs unchanged on a real local cluster.

The examples are submitted together when the module starts, so they share the cluster's
slots and run side by side; each test then checks what a user of one stage would see
through the CLI or the API: its state, metrics, checkpoints and logs. The module also runs
the fragments of Determined's timm port (the checkpoint saver, the restore block,
``should_preempt`` and hyperparameters through ``argparse.Namespace``).

The small ``Api`` helper here (in-process gRPC calls, cheap enough to poll) is shared by
the digits and launcher tests.
"""

from __future__ import annotations

import asyncio
import json
import pathlib
import textwrap
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import pytest

from determined.api.gen import v1
from determined.common import client, structs
from tests.cluster import EXAMPLES, Cluster, cluster_fixture

T = TypeVar("T")

CORE_API = EXAMPLES / "core_api"
ENDED = ("COMPLETED", "ERROR", "CANCELED")


class Api:
    """The master's gRPC API, called in-process: what a script using the client would see."""

    def __init__(self, cluster: Cluster) -> None:
        self.address = cluster.address
        self.token = cluster.token

    def call(self, rpc: Callable[[v1.DeterminedStub], Awaitable[T]]) -> T:
        async def go() -> T:
            async with client.session(self.address, token=self.token) as s:
                return await s.call(rpc(s.stub))

        return asyncio.run(go())

    def experiment(self, exp_id: int) -> v1.Experiment:
        out = self.call(lambda s: s.get_experiment(v1.GetExperimentRequest(experiment_id=exp_id)))
        assert out.experiment is not None
        return out.experiment

    def state(self, exp_id: int) -> str:
        return self.experiment(exp_id).state.name.removeprefix("STATE_")

    def trials(self, exp_id: int) -> list[v1.Trial]:
        out = self.call(
            lambda s: s.get_experiment_trials(v1.GetExperimentTrialsRequest(experiment_id=exp_id))
        )
        return sorted(out.trials, key=lambda t: t.id)

    def trial(self, trial_id: int) -> v1.Trial:
        out = self.call(lambda s: s.get_trial(v1.GetTrialRequest(trial_id=trial_id)))
        assert out.trial is not None
        return out.trial

    def metrics(self, trial_id: int, group: str) -> list[tuple[int, dict[str, Any]]]:
        """``(steps_completed, metrics)`` of every report of ``group``, in order."""
        out = self.call(
            lambda s: s.get_trial_metrics(v1.GetTrialMetricsRequest(trial_id=trial_id, group=group))
        )
        return [(r.steps_completed, json.loads(r.metrics)) for r in out.reports]

    def checkpoints(self, trial_id: int) -> list[v1.Checkpoint]:
        out = self.call(lambda s: s.get_checkpoints(v1.GetCheckpointsRequest(trial_id=trial_id)))
        return sorted(out.checkpoints, key=lambda c: (c.steps_completed, c.report_time))

    def logs(self, trial_id: int, search: str = "") -> list[str]:
        """The trial's log lines, with ``[rank=N] `` in front where the master stored a rank."""

        async def go() -> list[str]:
            async with client.session(self.address, token=self.token) as s:
                request = v1.TrialLogsRequest(trial_id=trial_id, search_text=search)
                return [
                    ("" if log.rank_id is None else f"[rank={log.rank_id}] ") + log.message
                    async for r in s.stub.trial_logs(request)
                    for log in r.logs
                ]

        return asyncio.run(go())

    def log_text(self, trial_id: int) -> str:
        return "\n".join(self.logs(trial_id))

    def wait(self, exp_id: int, *states: str, timeout: float = 240) -> str:
        """Wait for one of ``states`` (or any end); a wrong end shows the trials' logs."""
        deadline = time.monotonic() + timeout
        while (state := self.state(exp_id)) not in states and state not in ENDED:
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"experiment {exp_id} is {state} after {timeout}s, not {states}"
                    + self._tails(exp_id)
                )
            time.sleep(0.5)
        assert state in states, f"experiment {exp_id} ended {state}, not {states}" + self._tails(
            exp_id
        )
        return state

    def wait_for_log(self, trial_id: int, text: str, timeout: float = 240) -> str:
        deadline = time.monotonic() + timeout
        while not (found := self.logs(trial_id, search=text)):
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"no log line of trial {trial_id} contains {text!r} after {timeout}s:\n"
                    + "\n".join(self.logs(trial_id)[-40:])
                )
            time.sleep(0.5)
        return found[0]

    def first_trial(self, exp_id: int, timeout: float = 60) -> v1.Trial:
        deadline = time.monotonic() + timeout
        while not (trials := self.trials(exp_id)):
            assert time.monotonic() < deadline, f"experiment {exp_id} has no trial"
            time.sleep(0.3)
        return trials[0]

    def _tails(self, exp_id: int) -> str:
        return "".join(
            f"\n--- trial {t.id} ({t.state.name}):\n" + "\n".join(self.logs(t.id)[-60:])
            for t in self.trials(exp_id)
        )


def checkpoint_dir(ckpt: v1.Checkpoint) -> pathlib.Path:
    """Where a checkpoint's files are: ``<host_path>[/<storage_path>]/<uuid>``."""
    storage = structs.python(ckpt.storage)
    base = pathlib.Path(storage["host_path"])
    if storage.get("storage_path"):
        base = base / storage["storage_path"]
    return base / ckpt.uuid


def write_context(root: pathlib.Path, files: dict[str, str]) -> pathlib.Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (root / name).write_text(textwrap.dedent(text).lstrip())
    return root


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    # Eight slots: every stage (the hyperparameter search has 4 trials) runs at once.
    yield from cluster_fixture(tmp_path_factory.mktemp("core_api"), agents=1, slots=8)


@pytest.fixture(scope="module")
def api(cluster: Cluster) -> Api:
    return Api(cluster)


@pytest.fixture(scope="module")
def stages(cluster: Cluster) -> dict[str, int]:
    """Every stage of the walkthrough, submitted as the docs say: ``det e create X.yaml .``."""
    return {
        name: cluster.create(CORE_API / f"{name}.yaml", CORE_API)
        for name in ("0_start", "1_metrics", "2_checkpoints", "3_hpsearch", "4_distributed")
    }


def test_core_api_stage0_plain_loop_runs_unchanged(api: Api, stages: dict[str, int]) -> None:
    exp_id = stages["0_start"]
    api.wait(exp_id, "COMPLETED")
    (trial,) = api.trials(exp_id)
    logs = api.log_text(trial.id)
    assert "x is now 1\n" in logs + "\n"
    assert "x is now 100" in logs
    assert api.metrics(trial.id, "") == []


def test_core_api_stage1_metrics_reach_the_master(
    cluster: Cluster, api: Api, stages: dict[str, int]
) -> None:
    exp_id = stages["1_metrics"]
    api.wait(exp_id, "COMPLETED")
    (trial,) = api.trials(exp_id)
    assert api.metrics(trial.id, "training") == [(n, {"x": n}) for n in range(10, 101, 10)]
    assert api.metrics(trial.id, "validation") == [(100, {"x": 100})]
    # The CLI shows the same reports.
    described = json.loads(cluster.det("trial", "describe", str(trial.id), "--json").stdout)
    assert described["trial"]["state"] == "COMPLETED"
    assert described["trial"]["best_validation_metric"] == 100
    reports = described["workloads"]
    assert [m["steps_completed"] for m in reports if m["group"] == "training"] == list(
        range(10, 101, 10)
    )


def test_core_api_stage2_checkpoints_are_recorded_with_their_files(
    api: Api, stages: dict[str, int]
) -> None:
    exp_id = stages["2_checkpoints"]
    api.wait(exp_id, "COMPLETED")
    (trial,) = api.trials(exp_id)
    ckpts = api.checkpoints(trial.id)
    assert ckpts, "no checkpoint was recorded"
    assert {c.steps_completed for c in ckpts} <= set(range(10, 101, 10))
    assert trial.latest_checkpoint_uuid == ckpts[-1].uuid
    assert ckpts[-1].steps_completed == 100
    for ckpt in ckpts:
        if ckpt.state != v1.CheckpointState.COMPLETED:
            continue  # garbage-collected by the checkpoint policy
        path = checkpoint_dir(ckpt)
        steps = ckpt.steps_completed
        assert (path / "state").read_text() == f"{steps},{steps},{trial.id}"
        assert json.loads((path / "metadata.json").read_text()) == {"steps_completed": steps}
        assert structs.python(ckpt.metadata) == {"steps_completed": steps}
        assert set(ckpt.resources) == {"state", "metadata.json"}
    assert api.metrics(trial.id, "validation") == [(100, {"x": 100})]


def test_core_api_stage3_search_gives_each_trial_its_hparams_and_lengths(
    api: Api, stages: dict[str, int]
) -> None:
    exp_id = stages["3_hpsearch"]
    api.wait(exp_id, "COMPLETED", timeout=300)
    trials = api.trials(exp_id)
    assert len(trials) == 4
    assert all(t.state.name.endswith("COMPLETED") for t in trials)
    for trial in trials:
        increment_by = structs.python(trial.hparams)["increment_by"]
        assert 1 <= increment_by <= 8
        validations = api.metrics(trial.id, "validation")
        assert validations, f"trial {trial.id} reported no validation"
        # One validation per searcher operation; x grows by increment_by per step.
        for steps, metrics in validations:
            assert metrics == {"x": increment_by * steps}
        assert validations[-1][0] <= 100
        assert trial.best_validation_metric == max(m["x"] for _, m in validations)
        assert api.checkpoints(trial.id)[-1].steps_completed == validations[-1][0]


def test_core_api_stage3_asha_trains_the_best_trial_to_max_length(
    api: Api, stages: dict[str, int]
) -> None:
    exp_id = stages["3_hpsearch"]
    api.wait(exp_id, "COMPLETED", timeout=300)
    trials = api.trials(exp_id)
    reached = {t.id: api.metrics(t.id, "validation")[-1][0] for t in trials}
    # Four trials, divisor 4: the best of the first rung is promoted to max_length.
    assert max(reached.values()) == 100, reached
    best = max(structs.python(t.hparams)["increment_by"] for t in trials)
    for trial in trials:
        if reached[trial.id] == 100:
            assert structs.python(trial.hparams)["increment_by"] == best


def test_core_api_stage4_workers_allgather_every_increment(
    cluster: Cluster, api: Api, stages: dict[str, int]
) -> None:
    exp_id = stages["4_distributed"]
    api.wait(exp_id, "COMPLETED")
    (trial,) = api.trials(exp_id)
    # Two workers with increment_by 1: each step adds the sum of both.
    assert api.metrics(trial.id, "validation") == [(100, {"x": 200})]
    assert api.metrics(trial.id, "training")[-1] == (100, {"x": 200})
    logs = api.log_text(trial.id)
    assert "[rank=0] " in logs and "rank 0 finished with x=200" in logs
    assert "rank 1 finished with x=200" in logs
    only_rank1 = cluster.logs(trial.id, "--rank-id", "1")
    assert "rank 1 finished with x=200" in only_rank1
    assert "rank 0 finished" not in only_rank1
    assert all("[rank=1]" in line for line in only_rank1.splitlines() if line.strip())
    assert api.checkpoints(trial.id)[-1].steps_completed == 100


# Determined's port of timm's train.py to the Core API, reduced to its Core API fragments
# (as published, apart from a stand-in model, so that no download or GPU is needed). The
# first run crashes once after a checkpoint; the restart resumes from it.
TIMM_PORT = '''
import argparse
import contextlib
import json
import logging
import os
import shutil
import sys

import determined as det

_logger = logging.getLogger("train")
EPOCH_LENGTH = 10

config_parser = argparse.ArgumentParser(description="Training Config", add_help=False)
config_parser.add_argument("-c", "--config", default="", type=str)
parser = argparse.ArgumentParser(description="Stand-in for timm's train.py")
parser.add_argument("data_dir", nargs="?")
parser.add_argument("--dataset", default="")
parser.add_argument("--dataset-download", action="store_true", default=False)
parser.add_argument("--input-size", default=None, nargs=3, type=int)
parser.add_argument("--epochs", type=int, default=300)
parser.add_argument("--lr", type=float, default=None)
parser.add_argument("--resume", default="", type=str)
parser.add_argument("--output", default="output", type=str)


def _parse_args(namespace=None):
    args_config, remaining = config_parser.parse_known_args()
    args = parser.parse_args(remaining, namespace=namespace)
    args_text = json.dumps(vars(args), sort_keys=True)
    return args, args_text


class CheckpointSaver:
    """timm.utils.CheckpointSaver, in short: writes the latest state to a local file."""

    def __init__(self, model, args, checkpoint_dir):
        self.model = model
        self.args = args
        self.checkpoint_dir = checkpoint_dir
        os.makedirs(checkpoint_dir, exist_ok=True)

    def save_checkpoint(self, epoch, metric=None):
        save_path = os.path.join(self.checkpoint_dir, "last.pth.tar")
        self._save(save_path, epoch, metric)

    def _save(self, save_path, epoch, metric=None):
        with open(save_path, "w") as f:
            json.dump({"epoch": epoch, "model": self.model, "metric": metric}, f)


def resume_checkpoint(model, checkpoint_path):
    with open(checkpoint_path) as f:
        state = json.load(f)
    model.update(state["model"])
    return state["epoch"] + 1


class DeterminedCheckpointSaver(CheckpointSaver):
    def __init__(self, trial_id, epoch_length, *args, **kwargs):
        self.trial_id = trial_id
        self.epoch_length = epoch_length
        super().__init__(*args, **kwargs)

    def _save(self, save_path, epoch, metric=None):
        super()._save(save_path, epoch, metric)
        checkpoint_metadata = {
            "steps_completed": self.epoch_length * (epoch + 1),
            "trial_id": self.trial_id,
        }
        with core_context.checkpoint.store_path(checkpoint_metadata) as (path, _):
            shutil.copy2(save_path, path.joinpath("data"))


def main(core_context):
    info = det.get_cluster_info()
    # If running in local mode, cluster info will be None.
    if info is not None:
        latest_checkpoint = info.latest_checkpoint
        trial_id = info.trial.trial_id
    else:
        latest_checkpoint = None
        trial_id = -1

    hparams = argparse.Namespace(**info.trial.hparams)
    args, args_text = _parse_args(hparams)
    _logger.info(f"Arguments and hyperparameters: {args_text}")

    if "LOCAL_RANK" in os.environ:
        args.local_rank = int(os.environ["LOCAL_RANK"])
    else:
        args.local_rank = 0
    args.rank = int(os.environ.get("RANK", "0"))

    model = {"w": 1.0}
    resume_epoch = None
    if latest_checkpoint is not None:
        restore_path_context = core_context.checkpoint.restore_path(latest_checkpoint)
    else:
        restore_path_context = contextlib.nullcontext()
    with restore_path_context as restore_path:
        if restore_path is not None:
            checkpoint_path = restore_path.joinpath("data")
        else:
            checkpoint_path = args.resume
        if checkpoint_path:
            resume_epoch = resume_checkpoint(model, checkpoint_path)
        if latest_checkpoint is not None:
            metadata = core_context.checkpoint.get_metadata(latest_checkpoint)
            prev_trial_id = metadata["trial_id"]
            if trial_id != prev_trial_id:
                resume_epoch = 0
    start_epoch = resume_epoch if resume_epoch is not None else 0
    _logger.info(f"starting at epoch {start_epoch}")

    saver = None
    if args.rank == 0:
        saver = DeterminedCheckpointSaver(trial_id, EPOCH_LENGTH, model, args, args.output)

    best_metric = None
    next_epoch = start_epoch
    for op in core_context.searcher.operations():
        for epoch in range(next_epoch, op.length):
            model["w"] = model["w"] * (1.0 - args.lr)  # ... train for one epoch
            train_metrics = {"loss": model["w"]}
            latest_batch = EPOCH_LENGTH * (epoch + 1)
            if args.rank == 0:
                core_context.train.report_training_metrics(steps_completed=latest_batch, metrics=train_metrics)
            eval_metrics = {"loss": model["w"]}
            best_metric = eval_metrics["loss"]
            if args.rank == 0:
                # Prefix metrics with val_ to distinguish from training metrics.
                core_context.train.report_validation_metrics(
                    steps_completed=latest_batch,
                    metrics={"val_" + k: v for k, v in eval_metrics.items()},
                )
                op.report_progress(epoch)
            if saver is not None:
                saver.save_checkpoint(epoch, metric=eval_metrics["loss"])
            if latest_checkpoint is None and epoch == 2:
                _logger.info("crashing on purpose after epoch 2")
                sys.exit(5)
            if core_context.preempt.should_preempt():
                # Terminate the process by returning from main.
                return
        next_epoch = op.length
        if args.rank == 0:
            op.report_completed(best_metric)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
    distributed = det.core.DistributedContext.from_torch_distributed()
    with det.core.init(distributed=distributed) as core_context:
        main(core_context)
'''  # noqa: E501

# The published step-4 config, with two grid points instead of five, one slot per trial and
# one restart (the first run crashes on purpose).
RETRIED_REPORT = """
import asyncio, os

from determined.api.gen import v1
from determined.common import client

report = v1.ReportTrialMetricsRequest(
    trial_id=int(os.environ["DET_TRIAL_ID"]),
    run_id=int(os.environ["DET_TRIAL_RUN_ID"]),
    reports=[
        v1.MetricReport(group="training", steps_completed=5, metrics='{"loss": 0.5}'),
        v1.MetricReport(group="validation", steps_completed=5, metrics='{"loss": 0.25}'),
    ],
)
more = v1.ReportTrialMetricsRequest(
    trial_id=report.trial_id,
    run_id=report.run_id,
    reports=[v1.MetricReport(group="validation", steps_completed=5, metrics='{"acc": 0.75}')],
)


async def main():
    async with client.session(os.environ["DET_MASTER"], token=os.environ["DET_SESSION_TOKEN"]) as s:
        # The first attempt was stored but its answer lost: the harness sends it again.
        for request in (report, report, more, more):
            await s.stub.report_trial_metrics(request)
    print("reported", flush=True)


asyncio.run(main())
"""


def test_a_report_sent_twice_is_stored_once(
    cluster: Cluster, api: Api, tmp_path: pathlib.Path
) -> None:
    ctx = write_context(tmp_path / "retried", {"train.py": RETRIED_REPORT})
    cfg = write_context(
        tmp_path,
        {
            "retried.yaml": """
            name: retried-report
            entrypoint: python3 train.py
            searcher: {name: single, metric: loss, max_length: 5}
            max_restarts: 0
            """
        },
    )
    exp_id = cluster.create(cfg / "retried.yaml", ctx)
    trial = api.first_trial(exp_id)
    api.wait_for_log(trial.id, "reported")
    api.wait(exp_id, "COMPLETED")
    assert api.metrics(trial.id, "training") == [(5, {"loss": 0.5})]
    # A later report of the same step adds what it has that the stored one lacks.
    assert api.metrics(trial.id, "validation") == [(5, {"loss": 0.25, "acc": 0.75})]
    assert api.trial(trial.id).best_validation_metric == 0.25


TIMM_PORT_CONFIG = """
name: core-api-timm-step4
entrypoint: >-
  python -m determined.launch.torch_distributed
  python step4-hyperparameters.py --dataset=torch/cifar10 --dataset-download data --input-size 3 32 32 --epochs 5
max_restarts: 1
hyperparameters:
  lr:
    type: log
    base: 10
    minval: -2
    maxval: -1
    count: 2
resources:
  slots_per_trial: 1
searcher:
  name: grid
  max_length: 5
  metric: val_loss
"""  # noqa: E501


@pytest.mark.slow
def test_core_api_timm_port_fragments_run_and_resume(
    cluster: Cluster, api: Api, tmp_path: pathlib.Path
) -> None:
    ctx = write_context(tmp_path / "timm", {"step4-hyperparameters.py": TIMM_PORT})
    cfg = write_context(tmp_path, {"step4.yaml": TIMM_PORT_CONFIG}) / "step4.yaml"
    exp_id = cluster.create(cfg, ctx)
    api.wait(exp_id, "COMPLETED", timeout=300)
    trials = api.trials(exp_id)
    assert sorted(structs.python(t.hparams)["lr"] for t in trials) == pytest.approx([0.01, 0.1])
    for trial in trials:
        lr = structs.python(trial.hparams)["lr"]
        logs = api.log_text(trial.id)
        # Hyperparameters became the parser's namespace; the command line still parsed.
        assert f'"lr": {lr}' in logs and '"dataset": "torch/cifar10"' in logs
        assert '"input_size": [3, 32, 32]' in logs
        # The crash after epoch 2 cost one restart, which resumed from the checkpoint.
        assert "crashing on purpose after epoch 2" in logs
        assert "starting at epoch 0" in logs and "starting at epoch 3" in logs
        assert trial.restarts == 1
        validations = api.metrics(trial.id, "validation")
        assert [steps for steps, _ in validations] == [10, 20, 30, 40, 50]
        assert validations[-1][1]["val_loss"] == pytest.approx((1 - lr) ** 5)
        latest = api.checkpoints(trial.id)[-1]
        assert structs.python(latest.metadata) == {"steps_completed": 50, "trial_id": trial.id}
        assert set(latest.resources) == {"data", "metadata.json"}
        saved = json.loads((checkpoint_dir(latest) / "data").read_text())
        assert saved["epoch"] == 4 and saved["model"]["w"] == pytest.approx((1 - lr) ** 5)


def test_a_script_at_debug_level_sees_its_own_lines_and_no_transport_chatter(
    cluster: Cluster, api: Api, tmp_path: pathlib.Path
) -> None:
    # Determined's Core API tutorials configure logging.DEBUG; the harness's HTTP/2 clients
    # (hpack, h2, grpclib: the Core API's and the SDK's) and their event loops must not fill
    # the trial's log at that level.
    context = write_context(
        tmp_path / "debug",
        {
            "debug.py": """
                import logging

                import determined as det
                from determined.experimental import client

                logging.basicConfig(level=logging.DEBUG, format=det.LOG_FORMAT)
                with det.core.init() as core_context:
                    for op in core_context.searcher.operations():
                        for step in range(1, 4):
                            logging.debug("user debug line %d", step)
                            core_context.train.report_training_metrics(step, {"x": step})
                        core_context.train.report_validation_metrics(3, {"x": 3})
                        op.report_completed(3)
                exp = client.get_experiment(det.get_cluster_info().trial.experiment_id)
                logging.debug("user debug line: the SDK sees experiment %d", exp.id)
                logging.debug("user debug line after close")
            """,
            "debug.yaml": f"""
                name: core-api-debug-logging
                entrypoint: python3 debug.py
                searcher: {{name: single, metric: x, max_length: 1}}
                max_restarts: 0
                environment:
                  environment_variables: ["DET_USER=admin", "DET_PASS={cluster.admin_password}"]
            """,
        },
    )
    exp_id = cluster.create(context / "debug.yaml", context)
    api.wait(exp_id, "COMPLETED")
    (trial,) = api.trials(exp_id)
    lines = api.logs(trial.id)
    assert sum(line.startswith("DEBUG:") and "user debug line" in line for line in lines) == 5
    assert f"the SDK sees experiment {exp_id}" in "\n".join(lines)
    # The harness's own debug lines (``determined.core: report ...``) are the user's to see.
    chatter = [
        line
        for line in lines
        if line.startswith("DEBUG:") and "user debug" not in line and "] determined." not in line
    ]
    assert chatter == [], "\n".join(chatter[:20])


def test_a_script_that_ends_without_closing_the_context_still_delivers_its_metrics(
    cluster: Cluster, api: Api, tmp_path: pathlib.Path
) -> None:
    # A script that fails before it leaves `with core.init()` (or never uses `with`) ends
    # with the Core API still open: the context is closed at exit, before Python stops its
    # thread pools, so the reports still pending reach the master, and the log shows the
    # script's own traceback and nothing of the harness's background tasks.
    context = write_context(
        tmp_path / "raises",
        {
            "raises.py": """
                import determined as det

                core_context = det.core.init()
                core_context.train.report_training_metrics(1, {"x": 1})
                raise ValueError("the user's own failure")
            """,
            "raises.yaml": """
                name: core-api-raises
                entrypoint: python3 raises.py
                searcher: {name: single, metric: x, max_length: 1}
                max_restarts: 0
            """,
        },
    )
    exp_id = cluster.create(context / "raises.yaml", context)
    api.wait(exp_id, "ERROR")
    (trial,) = api.trials(exp_id)
    text = "\n".join(api.logs(trial.id))
    assert "ValueError: the user's own failure" in text
    assert "background task" not in text
    assert "not recorded by the master" not in text
    assert api.metrics(trial.id, "training") == [(1, {"x": 1})]
