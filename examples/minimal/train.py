"""The smallest experiment: a plain script, no Determined imports needed.

It reads its hyperparameters from the environment the cluster sets and prints progress;
everything it prints shows up in `det trial logs`.
"""

import json
import os
import time

hparams = json.loads(os.environ.get("DET_HPARAMS", "{}"))
steps = int(hparams.get("steps", 5))
print(f"training for {steps} steps with hyperparameters {hparams}", flush=True)
for step in range(1, steps + 1):
    time.sleep(0.05)
    print(f"step {step}/{steps}: loss={1.0 / step:.3f}", flush=True)
print("done", flush=True)
