"""Two PyTorchTrial workers on CPU (gloo), without a master.

The Core API's collectives normally pass through the master; here each worker's
``DistributedContext`` is given an exchange over ``torch.distributed`` instead, so the
trainer's distributed path (DDP, sharded data, metrics averaged through ``allgather``, the
chief alone reporting and checkpointing) runs for real in two processes. The full launcher
path (``determined.launch.torch_distributed --trial``) needs a master and belongs to the
cluster tests.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import socket
import sys
from typing import Any

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from determined import core, pytorch

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "pytorch_trial"
HPARAMS = {"global_batch_size": 32, "lr": 0.1, "hidden": 32, "optimizer": "sgd"}
CONFIG = {
    "searcher": {"name": "single", "metric": "validation_loss", "max_length": {"batches": 60}},
    "scheduling_unit": 20,
}


class TorchExchange:
    """The Core API's all-gather carried by torch.distributed (gloo) instead of the master."""

    allocation_id = "test-allocation"

    def all_gather(
        self, *, group: str, seq: int, rank: int, size: int, data: bytes, timeout: float
    ) -> list[bytes]:
        out: list[Any] = [None] * size
        dist.all_gather_object(out, data)
        return out

    def close(self) -> None:
        pass


def digits_trial() -> type[pytorch.PyTorchTrial]:
    spec = importlib.util.spec_from_file_location("pydet_digits_dist", EXAMPLE / "model_def.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    trial: type[pytorch.PyTorchTrial] = module.DigitsTrial
    return trial


def final_weights(controller: pytorch.TrialController) -> list[torch.Tensor]:
    return [
        p.detach().clone() for m in controller.context._unwrapped_models() for p in m.parameters()
    ]


def worker(rank: int, size: int, port: int, out: str) -> None:
    os.environ.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
    for var in ("DET_ALLOCATION_ID", "WORLD_SIZE", "RANK"):
        os.environ.pop(var, None)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=size)
    try:
        distributed = core.DistributedContext(
            rank=rank, size=size, local_rank=rank, local_size=size, cross_rank=0, cross_size=1
        )
        distributed._attach(TorchExchange())
        reports: list[Any] = []
        with core.init(distributed=distributed, checkpoint_storage=f"{out}/ckpt") as ctx:
            report = ctx.train.report_validation_metrics

            def recording(steps_completed: int, metrics: dict[str, Any]) -> None:
                reports.append((steps_completed, metrics))
                report(steps_completed, metrics)

            ctx.train.report_validation_metrics = recording  # type: ignore[method-assign]
            controller = pytorch.TrialController(
                digits_trial(), ctx, pytorch.TrialEnv(hparams=HPARAMS, config=CONFIG)
            )
            outcome = controller.run()
            wrapped = type(controller.context.models[0]).__name__
        torch.save(final_weights(controller), f"{out}/weights-{rank}.pt")
        pathlib.Path(f"{out}/result-{rank}.json").write_text(
            json.dumps(
                {
                    "outcome": outcome.value,
                    "batches": controller.batches_trained,
                    "per_slot": controller.context.get_per_slot_batch_size(),
                    "wrapped": wrapped,
                    "reports": reports,
                }
            )
        )
    finally:
        dist.destroy_process_group()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture(autouse=True)
def off_cluster(monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path) -> None:
    for var in ("DET_ALLOCATION_ID", "WORLD_SIZE", "RANK"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)


@pytest.mark.slow  # two fresh interpreters import torch: about a minute on a small machine
def test_two_workers_train_like_one_worker_with_the_same_global_batch(
    tmp_path: pathlib.Path,
) -> None:
    mp.spawn(worker, args=(2, free_port(), str(tmp_path)), nprocs=2, join=True)  # type: ignore[attr-defined,no-untyped-call]  # torch leaves spawn untyped
    results = [json.loads((tmp_path / f"result-{r}.json").read_text()) for r in (0, 1)]
    for result in results:
        assert result["outcome"] == "completed"
        assert result["batches"] == 60
        assert result["per_slot"] == 16
        assert result["wrapped"] == "DistributedDataParallel"
    # Only the chief reports and checkpoints.
    assert [steps for steps, _ in results[0]["reports"]] == [60]
    assert results[1]["reports"] == []
    assert results[0]["reports"][0][1]["validation_accuracy"] > 0.8
    assert len(list((tmp_path / "ckpt").iterdir())) == 1

    rank0, rank1 = (torch.load(tmp_path / f"weights-{r}.pt") for r in (0, 1))
    for a, b in zip(rank0, rank1, strict=True):
        assert torch.equal(a, b)

    # One worker with the same global batch sees the same samples per step: same weights.
    torch.set_num_threads(1)
    with core.init(checkpoint_storage=str(tmp_path / "single")) as ctx:
        single = pytorch.TrialController(
            digits_trial(), ctx, pytorch.TrialEnv(hparams=HPARAMS, config=CONFIG)
        )
        single.run()
    for a, b in zip(final_weights(single), rank0, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
