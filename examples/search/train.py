"""Stop-driven adaptive ASHA over a PyTorch classifier of scikit-learn's digits (Core API).

``adaptive_time.yaml`` sets ``time_metric: batches`` and ``max_time``: the trial gets one
operation of ``max_time`` batches, validates every ``data.validate_every`` batches with
``batches`` among its validation metrics, and ASHA stops the losers through the preemption
signal: ``should_preempt()`` turns True, the trial saves a checkpoint and exits, and the
master ends it as COMPLETED. A length-driven search works with the same loop: each
operation is one rung, and a trial promoted after it exited resumes from
``info.latest_checkpoint``.

Hyperparameters (``info.trial.hparams``): ``lr``, ``dropout``, ``batch_size`` and a nested
group ``model`` with ``hidden`` and ``optimizer``. An optimizer this script does not know
raises ``det.InvalidHP``: the trial ends as invalid, and the searcher samples another.

    det preview-search adaptive_time.yaml
    det experiment create adaptive_time.yaml .
"""

import logging
import os
import pathlib

import numpy as np
import torch
from torch import nn

import determined as det

log = logging.getLogger("search")

OPTIMIZERS = ("sgd", "adam")


def digits_arrays():
    """scikit-learn's 8x8 digits as float32 images in [0, 1] and int64 labels.

    Importing ``sklearn.datasets`` costs a few seconds of CPU, paid by every trial of a
    search; the arrays are cached (like torchvision's ``root=`` datasets) after the first.
    """
    default = pathlib.Path("~/.cache/pydet-examples/digits.npz").expanduser()
    cache = pathlib.Path(os.environ.get("DIGITS_CACHE", default))
    try:
        with np.load(cache) as f:
            return f["x"], f["y"]
    except (OSError, KeyError, ValueError):
        pass
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = digits.data.astype(np.float32) / 16.0
    y = digits.target.astype(np.int64)
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        # Trials start side by side: write a private file, then rename it into place.
        partial = cache.with_name(f"{cache.stem}.{os.getpid()}.npz")
        np.savez(partial, x=x, y=y)
        os.replace(partial, cache)
    except OSError as e:
        log.warning(f"could not cache the digits at {cache}: {e}")
    return x, y


def split(x, y):
    """The same 80/20 train/validation split in every trial."""
    order = np.random.default_rng(0).permutation(len(y))
    n_val = len(y) // 5
    val, train = order[:n_val], order[n_val:]
    return (torch.from_numpy(x[train]), torch.from_numpy(y[train])), (
        torch.from_numpy(x[val]),
        torch.from_numpy(y[val]),
    )


class Batches:
    """Shuffled training batches, batch ``n`` always the same for a seed: resuming at batch
    ``n`` continues the exact sequence a trial that never stopped would have seen."""

    def __init__(self, x, y, batch_size, seed):
        self.x, self.y = x, y
        self.batch_size = batch_size
        self.seed = seed
        self.per_epoch = len(y) // batch_size
        self._epoch, self._order = -1, None

    def get(self, n):
        epoch, i = divmod(n, self.per_epoch)
        if epoch != self._epoch:
            generator = torch.Generator().manual_seed(self.seed + epoch)
            self._epoch, self._order = epoch, torch.randperm(len(self.y), generator=generator)
        idx = self._order[i * self.batch_size : (i + 1) * self.batch_size]
        return self.x[idx], self.y[idx]


def build_model(hidden, dropout):
    return nn.Sequential(
        nn.Linear(64, hidden), nn.ReLU(), nn.Dropout(dropout), nn.Linear(hidden, 10)
    )


def build_optimizer(name, params, lr):
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=0.9)
    if name == "adam":
        return torch.optim.Adam(params, lr=lr)
    # Not a crash: these hyperparameters cannot be trained, so the searcher should move on.
    raise det.InvalidHP(f"optimizer {name!r} is not one of {', '.join(OPTIMIZERS)}")


def validate(model, val):
    model.eval()
    x, y = val
    with torch.no_grad():
        out = model(x)
        loss = nn.functional.cross_entropy(out, y).item()
        accuracy = (out.argmax(1) == y).float().mean().item()
    model.train()
    return {"val_loss": loss, "val_accuracy": accuracy}


class Trainer:
    def __init__(self, core_context, info):
        self.core = core_context
        self.trial_id = info.trial.trial_id
        hp = info.trial.hparams
        data = info.user_data
        self.report_every = int(data.get("report_every", 10))
        # Stop-driven searches need validations along the way; 0: only at the end of an op.
        self.validate_every = int(data.get("validate_every", 0))

        torch.manual_seed(info.trial.trial_seed)
        x, y = digits_arrays()
        train, self.val = split(x, y)
        batch_size = int(hp.get("batch_size", 32))
        self.batches = Batches(*train, batch_size, seed=info.trial.trial_seed)
        self.model = build_model(int(hp["model"]["hidden"]), float(hp["dropout"]))
        self.optimizer = build_optimizer(
            hp["model"]["optimizer"], self.model.parameters(), float(hp["lr"])
        )
        units = core_context.searcher.get_configured_units()
        # op.length is in the unit of searcher.max_length; this loop counts batches.
        if units == det.core.Unit.EPOCHS:
            self.batches_per_unit = self.batches.per_epoch
        elif units == det.core.Unit.RECORDS:
            self.batches_per_unit = 1 / batch_size
        else:
            self.batches_per_unit = 1
        self.done = 0  # batches trained by this trial, over all its runs
        self.saved_at = -1
        if info.latest_checkpoint is not None:
            self.restore(info.latest_checkpoint)

    def restore(self, storage_id):
        with self.core.checkpoint.restore_path(storage_id) as path:
            state = torch.load(path / "state.pt", weights_only=True)
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        if state["trial_id"] == self.trial_id:
            self.done = self.saved_at = int(state["batches"])
            log.info(f"resuming at batch {self.done} from checkpoint {storage_id}")
        else:
            # A new trial warm-started from another trial's checkpoint trains from batch 0.
            log.info(f"starting from the weights of trial {state['trial_id']}")

    def save(self):
        if self.saved_at == self.done:
            return
        metadata = {"steps_completed": self.done, "trial_id": self.trial_id}
        with self.core.checkpoint.store_path(metadata) as (path, _):
            state = {
                "model": self.model.state_dict(),
                "optimizer": self.optimizer.state_dict(),
                "batches": self.done,
                "trial_id": self.trial_id,
            }
            torch.save(state, path / "state.pt")
        self.saved_at = self.done

    def report_validation(self):
        metrics = validate(self.model, self.val)
        # `batches` is the time_metric of stop-driven ASHA: how far this trial has trained.
        metrics["batches"] = self.done
        self.core.train.report_validation_metrics(steps_completed=self.done, metrics=metrics)
        log.info(
            f"batch {self.done}: val_loss {metrics['val_loss']:.4f}, "
            f"val_accuracy {metrics['val_accuracy']:.4f}"
        )
        return metrics

    def stop_requested(self):
        """Paused, preempted, or stopped by ASHA: save and exit; the master decides whether
        the trial resumes later (pause) or has ended (ASHA's stop)."""
        if not self.core.preempt.should_preempt():
            return False
        log.info(f"stopping at batch {self.done}, as the master asked")
        self.save()
        return True

    def train_op(self, op):
        """Train to op.length; False if the trial must stop before finishing the op."""
        target = round(op.length * self.batches_per_unit)
        loss_sum, correct, seen = 0.0, 0, 0
        while self.done < target:
            x, y = self.batches.get(self.done)
            self.optimizer.zero_grad()
            out = self.model(x)
            loss = nn.functional.cross_entropy(out, y)
            loss.backward()
            self.optimizer.step()
            self.done += 1
            loss_sum += loss.item() * len(y)
            correct += (out.argmax(1) == y).sum().item()
            seen += len(y)
            if self.done % self.report_every == 0 or self.done == target:
                self.core.train.report_training_metrics(
                    steps_completed=self.done,
                    metrics={"loss": loss_sum / seen, "accuracy": correct / seen},
                )
                loss_sum, correct, seen = 0.0, 0, 0
                op.report_progress(self.done / self.batches_per_unit)
            validated = False
            if self.validate_every and self.done % self.validate_every == 0 and self.done < target:
                self.report_validation()
                validated = True
            # A flag read, cheap: a pause, or ASHA's verdict right after a validation.
            if (validated or self.done % self.report_every == 0) and self.stop_requested():
                return False
        return True

    def run(self):
        for op in self.core.searcher.operations():
            if not self.train_op(op):
                return
            metrics = self.report_validation()
            self.save()
            op.report_completed(metrics["val_loss"])
            if self.stop_requested():
                return


def main():
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
    torch.set_num_threads(1)
    info = det.get_cluster_info()
    assert info is not None and info.trial is not None, "run this script as a trial"
    with det.core.init() as core_context:
        Trainer(core_context, info).run()


if __name__ == "__main__":
    main()
