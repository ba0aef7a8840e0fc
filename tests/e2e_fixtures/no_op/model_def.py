"""A trial that trains nothing, for scenario tests: pydet's counterpart of Determined's
e2e ``no_op`` fixture, written against the Core API.

It "trains" in steps of ``scheduling_unit`` batches (sleeping ``training_batch_seconds``
per batch), reports a metric that moves with the batches trained (``metrics_progression``,
``metrics_base``, Gaussian noise of ``metrics_sigma``), validates and checkpoints at the end
of each searcher operation, and resumes from its latest checkpoint. Hyperparameters that
make it fail on purpose: a negative ``metrics_sigma`` (at startup),
``fail_on_first_validation`` (a message), ``chaos_probability`` (per step). Others:
``nan_validations`` (every validation metric is NaN), ``check_startup_hook_ran`` (the
context's ``startup-hook.sh`` must have run first), ``checkpoint_every`` (batches between
checkpoints besides the one at each operation's end), ``fail_at_batches`` (fail once that
many batches are trained and reported).
"""

from __future__ import annotations

import json
import os
import pathlib
import random
import time

import determined as det


def main() -> None:
    info = det.get_cluster_info()
    assert info is not None and info.trial is not None, "run me as a pydet trial"
    hp = info.trial.hparams
    metrics_sigma = float(hp.get("metrics_sigma", 0.0))
    assert 0 <= metrics_sigma
    progression = hp.get("metrics_progression", "decreasing")
    assert progression in ("increasing", "decreasing", "constant")
    base = float(hp.get("metrics_base", 0.9))
    batch_seconds = float(hp.get("training_batch_seconds", 0.0))
    fail_on_first_validation = hp.get("fail_on_first_validation", "")
    chaos = float(hp.get("chaos_probability", 0.0))
    nan_validations = bool(hp.get("nan_validations", False))
    checkpoint_every = int(hp.get("checkpoint_every", 0))
    fail_at_batches = int(hp.get("fail_at_batches", -1))
    if hp.get("check_startup_hook_ran", False):
        assert os.path.isfile("startup-hook-ran"), "the startup hook did not run"
    config = json.loads(os.environ.get("DET_EXPERIMENT_CONFIG") or "{}")
    unit = int(config.get("scheduling_unit") or 100)
    noise = random.Random(info.trial.trial_seed)

    def metric(batches: int) -> float:
        steps = batches / unit
        value = {
            "constant": base,
            "decreasing": base**steps,
            "increasing": 1 - base**steps,
        }[progression]
        return value + noise.gauss(0.0, metrics_sigma**2)

    with det.core.init() as core_context:
        batches = 0
        if info.latest_checkpoint is not None:
            with core_context.checkpoint.restore_path(info.latest_checkpoint) as path:
                batches = json.loads((pathlib.Path(path) / "no_op.json").read_text())["batches"]
            print(f"resumed at {batches} batches", flush=True)

        def save() -> None:
            with core_context.checkpoint.store_path({"steps_completed": batches}) as (path, _):
                (pathlib.Path(path) / "no_op.json").write_text(json.dumps({"batches": batches}))

        for op in core_context.searcher.operations():
            while batches < op.length:
                if noise.random() < chaos:
                    raise Exception("CHAOS! Executing random failure.")
                n = min(unit, op.length - batches)
                time.sleep(batch_seconds * n)
                batches += n
                core_context.train.report_training_metrics(batches, {"loss": metric(batches)})
                op.report_progress(batches)
                if batches == fail_at_batches:
                    raise Exception(f"failed at batch {batches}, as asked")
                if checkpoint_every and batches % checkpoint_every == 0:
                    save()
                if core_context.preempt.should_preempt():
                    save()
                    return
            if fail_on_first_validation:
                raise Exception(fail_on_first_validation)
            value = float("nan") if nan_validations else metric(batches)
            core_context.train.report_validation_metrics(batches, {"validation_error": value})
            save()
            op.report_completed(value)


if __name__ == "__main__":
    main()
