"""The digits classifier trained with DeepSpeed, on CPUs, under Determined's DeepSpeed launcher.

    python3 -m determined.launch.deepspeed python3 deepspeed_train.py

The launcher writes a hostfile for the trial's containers and runs DeepSpeed's own runner,
which starts one worker per slot. DeepSpeed finds no GPU and picks its CPU accelerator; the
workers talk over gloo. ``deepspeed.initialize`` wraps the model and optimizer in an engine
that does the data-parallel work (``engine.backward``, ``engine.step``) with the batch
sizes of ``ds_config.json``. The Core API context comes from DeepSpeed's environment
(``DistributedContext.from_deepspeed()``); the chief reports metrics, and every worker takes
part in saving the engine's checkpoint (``store_path(..., shard=True)``), which is also
how a paused trial resumes.
"""

import argparse
import json
import logging

import deepspeed
import torch
import torch.distributed
from sklearn.datasets import load_digits
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

import determined as det

_logger = logging.getLogger("digits")


def digits_datasets():
    """The same 80/20 train/validation split on every run and every worker."""
    digits = load_digits()
    x = torch.tensor(digits.data, dtype=torch.float32) / 16.0
    y = torch.tensor(digits.target, dtype=torch.long)
    order = torch.randperm(len(y), generator=torch.Generator().manual_seed(0))
    x, y = x[order], y[order]
    n_val = len(y) // 5
    return TensorDataset(x[n_val:], y[n_val:]), TensorDataset(x[:n_val], y[:n_val])


def build_model(hidden):
    return nn.Sequential(nn.Linear(64, hidden), nn.ReLU(), nn.Linear(hidden, 10))


def all_reduce_sums(*values):
    t = torch.tensor(values, dtype=torch.float64)
    torch.distributed.all_reduce(t)
    return t.tolist()


def validate(engine, loader):
    engine.eval()
    loss_sum, correct, count = 0.0, 0, 0
    with torch.no_grad():
        for x, y in loader:
            out = engine(x)
            loss_sum += nn.functional.cross_entropy(out, y, reduction="sum").item()
            correct += (out.argmax(1) == y).sum().item()
            count += len(y)
    loss_sum, correct, count = all_reduce_sums(loss_sum, correct, count)
    return {"loss": loss_sum / count, "accuracy": correct / count}


def main(core_context, args):
    with open(args.deepspeed_config) as f:
        ds_config = json.load(f)
    rank = core_context.distributed.rank
    size = core_context.distributed.size

    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    train_set, val_set = digits_datasets()
    train_sampler = DistributedSampler(train_set, num_replicas=size, rank=rank, seed=args.seed)
    train_loader = DataLoader(
        train_set, batch_size=ds_config["train_micro_batch_size_per_gpu"], sampler=train_sampler
    )
    val_sampler = DistributedSampler(val_set, num_replicas=size, rank=rank, shuffle=False)
    val_loader = DataLoader(val_set, batch_size=256, sampler=val_sampler)

    model = build_model(args.hidden)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=ds_config)
    _logger.info(f"DeepSpeed engine on {engine.device}, rank {rank} of {size}")

    # A paused trial continues from the engine checkpoint it saved last.
    start_epoch = 0
    info = det.get_cluster_info()
    if info is not None and info.latest_checkpoint is not None:
        with core_context.checkpoint.restore_path(info.latest_checkpoint) as path:
            _, client_state = engine.load_checkpoint(path, tag="engine")
        start_epoch = client_state["epoch"] + 1
        _logger.info(f"resumed from checkpoint {info.latest_checkpoint} at epoch {start_epoch}")

    for epoch in range(start_epoch, args.epochs):
        engine.train()
        train_sampler.set_epoch(epoch)
        loss_sum, count = 0.0, 0
        for x, y in train_loader:
            loss = nn.functional.cross_entropy(engine(x), y)
            engine.backward(loss)
            engine.step()
            loss_sum += loss.item() * len(y)
            count += len(y)
        loss_sum, count = all_reduce_sums(loss_sum, count)
        steps_completed = engine.global_steps
        eval_metrics = validate(engine, val_loader)
        if rank == 0:
            core_context.train.report_training_metrics(
                steps_completed=steps_completed, metrics={"loss": loss_sum / count}
            )
            core_context.train.report_validation_metrics(
                steps_completed=steps_completed,
                metrics={"val_" + k: v for k, v in eval_metrics.items()},
            )
            _logger.info(
                f"epoch {epoch}: train loss {loss_sum / count:.4f}, "
                f"val loss {eval_metrics['loss']:.4f}, val accuracy {eval_metrics['accuracy']:.4f}"
            )

        # Every worker saves its part of the engine's state into one checkpoint.
        metadata = {"steps_completed": steps_completed, "epoch": epoch}
        with core_context.checkpoint.store_path(metadata, shard=True) as (path, _):
            engine.save_checkpoint(path, tag="engine", client_state={"epoch": epoch})
        if core_context.preempt.should_preempt():
            return


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
    parser = argparse.ArgumentParser(description="Train an MLP on digits with DeepSpeed")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--seed", type=int, default=42)
    parser = deepspeed.add_config_arguments(parser)
    args = parser.parse_args()

    # DeepSpeed on CPUs: gloo is the backend every torch build has.
    deepspeed.init_distributed(dist_backend="gloo")
    distributed = det.core.DistributedContext.from_deepspeed()
    with det.core.init(distributed=distributed) as core_context:
        main(core_context, args)
