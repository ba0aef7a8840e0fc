"""Stage 1: data-parallel training with torch.distributed (DDP over gloo, so it runs on CPUs).

The entrypoint wraps the script in Determined's torch.distributed launcher::

    python3 -m determined.launch.torch_distributed python3 1_distributed.py --epochs 8

which runs torchrun with one worker per slot (``resources.slots_per_trial``), on every
agent the trial spans, and sets the usual ``RANK``/``WORLD_SIZE``/``LOCAL_RANK`` variables
that ``init_process_group(init_method="env://")`` reads. Each worker's output is tagged
``[rank=N]``, so ``det trial logs --rank-id 1`` shows one worker. Without a launcher the
script still runs as a single process.
"""

import argparse
import hashlib
import logging
import os

import torch
import torch.distributed
from sklearn.datasets import load_digits
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

_logger = logging.getLogger("digits")


def _parse_args(namespace=None):
    parser = argparse.ArgumentParser(description="Train an MLP on scikit-learn's digits")
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--seed", type=int, default=42)
    return parser.parse_args(namespace=namespace)


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


def weights_hash(model):
    """A short fingerprint of the weights: equal hashes mean bit-identical models."""
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().cpu().numpy().tobytes())
    return h.hexdigest()[:16]


# NEW: sums over all workers, so every worker sees the metrics of the whole dataset.
def all_reduce_sums(*values):
    t = torch.tensor(values, dtype=torch.float64)
    if torch.distributed.is_initialized():
        torch.distributed.all_reduce(t)
    return t.tolist()


def train_one_epoch(model, loader, optimizer):
    model.train()
    loss_sum, count = 0.0, 0
    for x, y in loader:
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()  # DDP averages the gradients of all workers here.
        optimizer.step()
        loss_sum += loss.item() * len(y)
        count += len(y)
    loss_sum, count = all_reduce_sums(loss_sum, count)
    return {"loss": loss_sum / count}


def validate(model, loader):
    model.eval()
    loss_sum, correct, count = 0.0, 0, 0
    with torch.no_grad():
        for x, y in loader:
            out = model(x)
            loss_sum += nn.functional.cross_entropy(out, y, reduction="sum").item()
            correct += (out.argmax(1) == y).sum().item()
            count += len(y)
    loss_sum, correct, count = all_reduce_sums(loss_sum, correct, count)
    return {"loss": loss_sum / count, "accuracy": correct / count}


def main():
    args = _parse_args()
    # NEW: the launcher tells each worker who it is through the environment.
    if "LOCAL_RANK" in os.environ:
        args.local_rank = int(os.environ["LOCAL_RANK"])
    else:
        args.local_rank = 0
    args.distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
    if args.distributed:
        # gloo runs on CPUs; on GPUs this would be backend="nccl".
        torch.distributed.init_process_group(backend="gloo", init_method="env://")
        args.rank = torch.distributed.get_rank()
        args.world_size = torch.distributed.get_world_size()
        _logger.info(
            "Training in distributed mode with multiple processes, 1 CPU per process. "
            f"Process {args.rank}, total {args.world_size}."
        )
    else:
        args.rank, args.world_size = 0, 1
        _logger.info("Training with a single process on 1 CPU.")

    torch.manual_seed(args.seed)
    torch.set_num_threads(1)

    train_set, val_set = digits_datasets()
    # NEW: each worker trains on its own shard; the sampler reshuffles per epoch.
    train_sampler = DistributedSampler(
        train_set, num_replicas=args.world_size, rank=args.rank, shuffle=True, seed=args.seed
    )
    train_loader = DataLoader(train_set, batch_size=args.batch_size, sampler=train_sampler)
    val_sampler = DistributedSampler(
        val_set, num_replicas=args.world_size, rank=args.rank, shuffle=False
    )
    val_loader = DataLoader(val_set, batch_size=256, sampler=val_sampler)

    model = build_model(args.hidden)
    if args.distributed:
        # NEW: DDP keeps the replicas identical by averaging gradients.
        model = DistributedDataParallel(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)

    for epoch in range(args.epochs):
        train_sampler.set_epoch(epoch)
        train_metrics = train_one_epoch(model, train_loader, optimizer)
        eval_metrics = validate(model, val_loader)
        if args.rank == 0:
            _logger.info(
                f"epoch {epoch}: train loss {train_metrics['loss']:.4f}, "
                f"val loss {eval_metrics['loss']:.4f}, "
                f"val accuracy {eval_metrics['accuracy']:.4f}"
            )
    _logger.info(f"final weights {weights_hash(model)}")

    if args.distributed:
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(levelname)s: %(name)s: %(message)s")
    main()
