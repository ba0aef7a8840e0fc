"""Sleeps ten minutes and never asks whether it should stop: only a kill ends it early."""

import time

for _ in range(600):
    time.sleep(1.0)
