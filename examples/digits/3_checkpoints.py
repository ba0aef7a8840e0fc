"""Stage 3: checkpoints, and pausing and resuming exactly where training stopped.

The script has its own checkpointing already (``CheckpointSaver``, like timm's: it writes
the latest state to a local file). Rather than replace it, a subclass copies each saved
file into a Determined checkpoint (``core_context.checkpoint.store_path``), whose metadata
records the steps completed and the trial. On start, the trial's latest checkpoint
(``info.latest_checkpoint``) is restored with ``core_context.checkpoint.restore_path``:
the weights, the optimizer's momentum and the epoch, so a paused and resumed trial ends
with bit-for-bit the same model as one that was never interrupted. After every epoch,
``core_context.preempt.should_preempt()`` tells all workers together whether to stop
(``det experiment pause``, or the scheduler making room for another job).
"""

import argparse
import contextlib
import hashlib
import logging
import os
import shutil

import torch
import torch.distributed
from sklearn.datasets import load_digits
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

import determined as det

_logger = logging.getLogger("digits")


def _parse_args(namespace=None):
    parser = argparse.ArgumentParser(description="Train an MLP on scikit-learn's digits")
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--resume", default="", help="a checkpoint file to start from")
    parser.add_argument("--output", default="output", help="where CheckpointSaver writes")
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


class CheckpointSaver:
    """The script's own checkpointing: saves the latest state to ``checkpoint_dir``."""

    def __init__(self, model, optimizer, args, checkpoint_dir):
        self.model = model
        self.optimizer = optimizer
        self.args = args
        self.checkpoint_dir = checkpoint_dir
        os.makedirs(checkpoint_dir, exist_ok=True)

    def save_checkpoint(self, epoch, metric=None):
        save_path = os.path.join(self.checkpoint_dir, "last.pth.tar")
        self._save(save_path, epoch, metric)
        return save_path

    def _save(self, save_path, epoch, metric=None):
        state = {
            "epoch": epoch,
            "state_dict": unwrap_model(self.model).state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "args": vars(self.args),
            "metric": metric,
        }
        torch.save(state, save_path)


def unwrap_model(model):
    return model.module if isinstance(model, DistributedDataParallel) else model


def resume_checkpoint(model, checkpoint_path, optimizer=None):
    """Load a CheckpointSaver file; returns the epoch to continue from."""
    state = torch.load(checkpoint_path, map_location="cpu", weights_only=False)
    unwrap_model(model).load_state_dict(state["state_dict"])
    if optimizer is not None:
        optimizer.load_state_dict(state["optimizer"])
    _logger.info(f"loaded checkpoint {checkpoint_path} (epoch {state['epoch']})")
    return state["epoch"] + 1


# NEW: layer Determined checkpoints on top of the script's own.
class DeterminedCheckpointSaver(CheckpointSaver):
    def __init__(self, trial_id, epoch_length, *args, **kwargs):
        self.trial_id = trial_id
        self.epoch_length = epoch_length
        super().__init__(*args, **kwargs)

    def _save(self, save_path, epoch, metric=None):
        super()._save(save_path, epoch, metric)
        checkpoint_metadata = {
            "steps_completed": self.epoch_length * (epoch + 1),
            "trial_id": self.trial_id,
        }
        with core_context.checkpoint.store_path(checkpoint_metadata) as (path, _):
            shutil.copy2(save_path, path.joinpath("data"))


def main(core_context):
    args = _parse_args()
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

    # NEW: where to resume from, and which trial this is.
    info = det.get_cluster_info()
    # If running in local mode, cluster info will be None.
    if info is not None:
        latest_checkpoint = info.latest_checkpoint
        trial_id = info.trial.trial_id
    else:
        latest_checkpoint = None
        trial_id = -1

    torch.manual_seed(args.seed)
    torch.set_num_threads(1)

    train_set, val_set = digits_datasets()
    train_sampler = DistributedSampler(
        train_set, num_replicas=args.world_size, rank=args.rank, shuffle=True, seed=args.seed
    )
    train_loader = DataLoader(train_set, batch_size=args.batch_size, sampler=train_sampler)
    val_sampler = DistributedSampler(
        val_set, num_replicas=args.world_size, rank=args.rank, shuffle=False
    )
    val_loader = DataLoader(val_set, batch_size=256, sampler=val_sampler)

    model = build_model(args.hidden)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)

    # NEW: restore the latest checkpoint on every worker, before DDP wraps the model.
    resume_epoch = None
    if latest_checkpoint is not None:
        restore_path_context = core_context.checkpoint.restore_path(latest_checkpoint)
    else:
        restore_path_context = contextlib.nullcontext()
    with restore_path_context as restore_path:
        if restore_path is not None:
            checkpoint_path = restore_path.joinpath("data")
        else:
            checkpoint_path = args.resume
        if checkpoint_path:
            resume_epoch = resume_checkpoint(model, checkpoint_path, optimizer=optimizer)
        if latest_checkpoint is not None:
            metadata = core_context.checkpoint.get_metadata(latest_checkpoint)
            prev_trial_id = metadata["trial_id"]
            if trial_id != prev_trial_id:
                resume_epoch = 0
    start_epoch = resume_epoch if resume_epoch is not None else 0
    if start_epoch > 0:
        _logger.info(f"resuming at epoch {start_epoch}")

    if args.distributed:
        model = DistributedDataParallel(model)

    # NEW: only the chief saves checkpoints.
    saver = None
    if args.rank == 0:
        saver = DeterminedCheckpointSaver(
            trial_id, len(train_loader), model, optimizer, args, args.output
        )

    for epoch in range(start_epoch, args.epochs):
        train_sampler.set_epoch(epoch)
        train_metrics = train_one_epoch(model, train_loader, optimizer)
        latest_batch = (epoch + 1) * len(train_loader)
        if args.rank == 0:
            core_context.train.report_training_metrics(steps_completed=latest_batch, metrics=train_metrics)  # noqa: E501  # fmt: skip

        eval_metrics = validate(model, val_loader)
        if args.rank == 0:
            core_context.train.report_validation_metrics(
                steps_completed=latest_batch,
                metrics={"val_" + k: v for k, v in eval_metrics.items()},
            )
            _logger.info(
                f"epoch {epoch}: train loss {train_metrics['loss']:.4f}, "
                f"val loss {eval_metrics['loss']:.4f}, "
                f"val accuracy {eval_metrics['accuracy']:.4f}, "
                f"weights {weights_hash(model)}"
            )

        if saver is not None:
            saver.save_checkpoint(epoch, metric=eval_metrics["loss"])

        # NEW: stop here, after a checkpoint, when the master asks; all workers agree.
        if core_context.preempt.should_preempt():
            # Terminate the process by returning from main.
            return

    _logger.info(f"final weights {weights_hash(model)}")
    if args.distributed:
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
    distributed = det.core.DistributedContext.from_torch_distributed()
    with det.core.init(distributed=distributed) as core_context:
        main(core_context)
