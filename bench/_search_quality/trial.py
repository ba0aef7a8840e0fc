"""The search-quality benchmark's trial: a synthetic objective of three hyperparameters that
falls as the trial trains, ``work_s`` seconds (a sleep) per step, a validation per searcher
operation. ``bench/search_quality.py`` computes the same objective for Ray Tune's trials."""

import math
import time

import determined as det


def objective(x, y, lr, step):
    """Smallest (0.3 / steps) at x=0.3, y=0.7, lr=10**-2.5; every step lowers it."""
    return (x - 0.3) ** 2 + (y - 0.7) ** 2 + 0.1 * (math.log10(lr) + 2.5) ** 2 + 0.3 / step


hp = det.get_cluster_info().trial.hparams
with det.core.init() as core_context:
    steps = 0
    for op in core_context.searcher.operations():
        while steps < op.length:
            time.sleep(float(hp["work_s"]))
            steps += 1
        value = objective(float(hp["x"]), float(hp["y"]), float(hp["lr"]), steps)
        core_context.train.report_validation_metrics(steps, {"val_loss": value})
        op.report_completed(value)
