"""Checks, inside a trial, that it sees exactly the GPUs the cluster gave it.

Run by scripts/gpu-check.sh on a machine with NVIDIA GPUs. The agent assigns slots; the
trial must see as many CUDA devices as its slots, the ones named by the cluster info, and
be able to compute on them. It reports when it held them, so that the check can tell that
no two trials used one GPU at the same time.
"""

import logging
import os
import subprocess
import time

import torch

import determined as det


def visible_uuids() -> list[str]:
    """The UUIDs of the GPUs this process sees, in CUDA's order."""
    out = subprocess.run(
        ["nvidia-smi", "--query-gpu=index,uuid", "--format=csv,noheader"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    by_index = dict(line.split(", ") for line in out.strip().splitlines())
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    return [by_index.get(v, v) for v in visible.split(",") if v]


def main(core: det.core.Context) -> None:
    info = det.get_cluster_info()
    assert info is not None, "not running on a cluster"
    slots = len(info.slot_ids)
    count = torch.cuda.device_count()
    uuids = visible_uuids()
    logging.info(
        "CUDA_VISIBLE_DEVICES=%s devices=%d uuids=%s cluster gpu_uuids=%s",
        os.environ.get("CUDA_VISIBLE_DEVICES"),
        count,
        uuids,
        info.gpu_uuids,
    )
    if count != slots:
        raise SystemExit(f"sees {count} CUDA devices, expected {slots} (its slots {info.slot_ids})")
    if info.gpu_uuids and sorted(info.gpu_uuids) != sorted(uuids):
        raise SystemExit(f"sees GPUs {uuids}, the cluster gave {info.gpu_uuids}")
    started = time.time()
    x = torch.randn(2048, 2048, device="cuda")
    for _ in range(20):
        x = torch.nn.functional.normalize(x @ x, dim=1)
    torch.cuda.synchronize()
    time.sleep(float(info.trial.hparams.get("hold_seconds", 3)))
    core.train.report_validation_metrics(
        steps_completed=1,
        metrics={"started": started, "ended": time.time(), "norm": float(x.norm())},
    )
    logging.info("computed on %s", torch.cuda.get_device_name(0))


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
    with det.core.init() as core_context:
        main(core_context)
