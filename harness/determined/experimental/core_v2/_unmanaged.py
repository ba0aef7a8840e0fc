"""Unmanaged runs: ``core_v2.init()`` in a script off the cluster reports into an experiment
it creates on the master, as Determined's unmanaged (detached) mode does.

The script's user (their cached session, or ``DET_USER``/``DET_PASS``) creates an
experiment with ``unmanaged: true`` (CreateExperiment), a trial in it (CreateTrial) and a run
of that trial (StartTrial); the Core API then reports metrics and checkpoints with the
user's session, into the experiment's own checkpoint storage. Closing the context ends the
trial (PatchTrial) COMPLETED, or ERROR when the script failed, and the experiment with it.
The master never schedules either. ``external_experiment_id`` and ``external_trial_id``
name them for a later run of the script, which resumes them (``core_v2.info
.latest_checkpoint`` is where it left off).
"""

from __future__ import annotations

import json
import logging
import uuid
from typing import TYPE_CHECKING, Any

import determined as det
from determined import core
from determined.common import errors

if TYPE_CHECKING:
    from determined.experimental import client as sdk
    from determined.experimental.core_v2._core_v2 import Config

log = logging.getLogger("determined.core")

# Determined's searcher for an unmanaged run: one trial, as long as the script runs.
_DEFAULT_SEARCHER = {"name": "single", "metric": "unmanaged", "max_length": 100000000}


def config_text(config: Config) -> str:
    """The experiment config of an unmanaged run, as YAML."""
    import yaml

    storage = config.checkpoint_storage
    if isinstance(storage, str):
        storage = {"type": "shared_fs", "host_path": storage}
    raw = {
        "name": config.name or f"unmanaged-{uuid.uuid4().hex[:8]}",
        "description": config.description,
        "labels": config.labels,
        "data": config.data,
        "searcher": config.searcher or dict(_DEFAULT_SEARCHER),
        "workspace": config.workspace,
        "project": config.project,
        "checkpoint_storage": storage,
    }
    return yaml.safe_dump({k: v for k, v in raw.items() if v is not None}, sort_keys=False)


def init(
    config: Config,
    *,
    client: sdk.Determined | None,
    distributed: core.DistributedContext | None,
    checkpoint_storage: str | dict[str, Any] | None,
    preempt_mode: core.PreemptMode,
) -> core.Context:
    """Create the experiment, trial and run on the master (rank 0, broadcast to the other
    workers) and return a Core API context that reports into them."""
    from determined.api.gen import v1
    from determined.common import structs
    from determined.core import _context
    from determined.experimental import client as sdk_module

    if config.external_trial_id is not None and config.external_experiment_id is None:
        raise errors.InvalidArgument(
            "core_v2.Config.external_trial_id needs external_experiment_id too: a trial is "
            "resumed within its experiment"
        )
    own_client = client is None
    sdk = client if client is not None else sdk_module.Determined()
    session = sdk._session
    text = config_text(config)
    hparams = config.hparams or {}

    def create() -> tuple[int, int, str, str, str]:
        made = session.call(
            lambda s: s.create_experiment(
                v1.CreateExperimentRequest(
                    config=text,
                    activate=True,
                    unmanaged=True,
                    external_experiment_id=config.external_experiment_id or "",
                )
            )
        )
        if made.experiment is None:
            raise errors.DetError("the master created no experiment for the unmanaged run")
        exp_id = int(made.experiment.id)
        trial = session.call(
            lambda s: s.create_trial(
                v1.CreateTrialRequest(
                    experiment_id=exp_id,
                    hparams=json.dumps(hparams),
                    unmanaged=True,
                    external_trial_id=config.external_trial_id or "",
                )
            )
        ).trial
        if trial is None:
            raise errors.DetError(f"the master created no trial in experiment {exp_id}")
        filled = json.dumps(structs.python(made.config))
        return (
            exp_id,
            int(trial.id),
            trial.task_id,
            filled,
            json.dumps(structs.python(trial.hparams)),
        )

    made: tuple[int, int, str, str, str] = (0, 0, "", "", "")
    if distributed is None or distributed.rank == 0:
        made = create()
    if distributed is not None and distributed.size > 1:
        made = distributed.broadcast(made)
    exp_id, trial_id, task_id, filled, stored_hparams = made
    # A resumed trial keeps the hyperparameters it was created with.
    hparams = json.loads(stored_hparams or "{}")
    started = session.call(
        lambda s: s.start_trial(v1.StartTrialRequest(trial_id=trial_id, resume=True))
    )
    cluster_id = session.call(lambda s: s.get_master(v1.GetMasterRequest())).cluster_id
    info = det.ClusterInfo(
        master_url=session.address,
        cluster_id=cluster_id,
        agent_id="unmanaged",
        slot_ids=[],
        task_id=task_id,
        allocation_id=task_id,
        session_token=session.session_token(),
        task_type="TRIAL",
        latest_checkpoint=started.latest_checkpoint,
        trial=det.TrialInfo(
            trial_id=trial_id,
            experiment_id=exp_id,
            trial_seed=0,
            hparams=hparams,
            config=json.loads(filled or "{}"),
            steps_completed=int(started.steps_completed),
            trial_run_id=int(started.trial_run_id),
        ),
    )
    context = _context._cluster_init(
        info, distributed, checkpoint_storage, preempt_mode, unmanaged=True
    )
    rank = 0 if distributed is None else distributed.rank

    def end(failed: bool) -> None:
        try:
            if rank == 0:
                state = v1.State.ERROR if failed else v1.State.COMPLETED
                try:
                    session.call(
                        lambda s: s.patch_trial(
                            v1.PatchTrialRequest(trial_id=trial_id, state=state)
                        )
                    )
                except errors.FailedPrecondition as e:
                    # Killed or canceled from the master meanwhile: it has ended already.
                    log.info("unmanaged trial %d: %s", trial_id, e)
                else:
                    log.info("unmanaged trial %d ended %s", trial_id, state.name)
        finally:
            if own_client:
                sdk.close()

    context._on_close = end
    log.info(
        "reporting into unmanaged experiment %d, trial %d: %s",
        exp_id,
        trial_id,
        f"{session.address}/det/experiments/{exp_id}",
    )
    return context
