"""Stage 0: a plain PyTorch classifier for scikit-learn's handwritten digits; no Determined.

The data ships with scikit-learn (``load_digits``: 1,797 8x8 images), so nothing is
downloaded. A small MLP trains for a few epochs with SGD and reaches about 95% validation
accuracy in a couple of seconds on a CPU. The later stages port this script to Determined one
feature at a time: ``diff 0_plain.py 1_distributed.py`` shows each step.

    python3 0_plain.py --epochs 8
"""

import argparse
import hashlib
import logging

import torch
from sklearn.datasets import load_digits
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

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


def train_one_epoch(model, loader, optimizer):
    model.train()
    loss_sum, count = 0.0, 0
    for x, y in loader:
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        loss_sum += loss.item() * len(y)
        count += len(y)
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
    return {"loss": loss_sum / count, "accuracy": correct / count}


def main():
    args = _parse_args()
    torch.manual_seed(args.seed)
    # Small models train fastest on one thread; it also keeps runs bit-for-bit repeatable.
    torch.set_num_threads(1)

    train_set, val_set = digits_datasets()
    val_loader = DataLoader(val_set, batch_size=256)
    model = build_model(args.hidden)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)

    for epoch in range(args.epochs):
        # A fresh, seeded shuffle per epoch: epoch N always sees the same order.
        shuffle = torch.Generator().manual_seed(args.seed + epoch)
        train_loader = DataLoader(
            train_set, batch_size=args.batch_size, shuffle=True, generator=shuffle
        )
        train_metrics = train_one_epoch(model, train_loader, optimizer)
        eval_metrics = validate(model, val_loader)
        _logger.info(
            f"epoch {epoch}: train loss {train_metrics['loss']:.4f}, "
            f"val loss {eval_metrics['loss']:.4f}, val accuracy {eval_metrics['accuracy']:.4f}"
        )
    _logger.info(f"final weights {weights_hash(model)}")


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(levelname)s: %(name)s: %(message)s")
    main()
