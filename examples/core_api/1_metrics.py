"""Stage 1: report training and validation metrics to the master.

``det.core.init()`` gives the Core API context; ``core_context.train`` reports metrics,
which ``det trial describe`` and the WebUI then show. Off the cluster the same script runs
too: the context's stand-ins log the metrics instead.
"""

import logging
import time

import determined as det


def main(core_context, increment_by):
    x = 0
    for batch in range(100):
        x += increment_by
        steps_completed = batch + 1
        time.sleep(0.02)
        logging.info(f"x is now {x}")
        # NEW: report training metrics every 10 steps.
        if steps_completed % 10 == 0:
            core_context.train.report_training_metrics(
                steps_completed=steps_completed, metrics={"x": x}
            )
    # NEW: report the final "validation" metric.
    core_context.train.report_validation_metrics(steps_completed=steps_completed, metrics={"x": x})


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)

    # NEW: create a Core API context and pass it to the training loop.
    with det.core.init() as core_context:
        main(core_context=core_context, increment_by=1)
