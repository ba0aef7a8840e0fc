"""Stage 0 of the Core API walkthrough: a plain training loop, no Determined at all.

"Training" increments ``x``; the later stages add metrics, checkpoints, hyperparameter
search and distributed training to this same loop, one feature at a time. It runs on a
cluster unchanged (``0_start.yaml``): whatever it prints shows up in the trial's logs.
"""

import logging
import time


def main(increment_by):
    x = 0
    for _ in range(100):
        x += increment_by
        time.sleep(0.02)
        print("x is now", x)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    main(increment_by=1)
