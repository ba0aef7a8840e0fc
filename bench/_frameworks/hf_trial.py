"""The trial of bench/frameworks.py's transformers rows: one process, both sides.

    python3 hf_trial.py steps OUT ROUNDS STEPS   per-step cost of DetCallback
    python3 hf_trial.py save OUT REPS MIB        checkpoint save through DetCallback

``steps``: ROUNDS Trainer runs of STEPS steps on the tiny GPT-2 (one thread), logging
every 10 steps as Determined's Trainer examples do, each with DetCallback on in every other
block of 20 steps (``Gate``; runs alternate which block comes first). A callback after it
notes the wall and CPU time at the end of each block, so DetCallback's work at a step (its
reports, hand-overs to the Core API and preemption checks) falls inside its block. The
final save and evaluation that DetCallback asks for are one-off costs, measured by ``save``.

``save``: the model with MIB MiB of frozen weights (safetensors, ``save_only_model``) is
trained one step and saved, REPS times with and REPS times without DetCallback,
alternating; the time from the end of the step to the end of the last ``on_save`` handler
is the save, and the time spent in DetCallback's ``on_save`` (between a callback before it
and one after it) is what it adds. The Trainer's output_dir and the checkpoint storage are
on one filesystem; the disk is synced before each save.
"""

import json
import os
import pathlib
import statistics
import sys
import time

# A copy of examples/hf_trainer_api/tiny_lm.py, put beside this file by bench/frameworks.py.
import tiny_lm
import torch
import transformers

import determined as det
from determined.transformers import DetCallback

torch.set_num_threads(1)
transformers.utils.logging.set_verbosity_error()


class Clock(transformers.TrainerCallback):
    """Notes the time at the end of each step and at each save."""

    def __init__(self) -> None:
        self.step_end = 0.0
        self.saves: list[float] = []
        # The time of each save spent in the callbacks between the two (DetCallback's).
        self.save_start = SaveStart()
        self.in_callbacks: list[float] = []

    def on_step_end(self, args, state, control, **kwargs):
        self.step_end = time.perf_counter()

    def on_save(self, args, state, control, **kwargs):
        now = time.perf_counter()
        self.saves.append(now - self.step_end)
        self.in_callbacks.append(now - self.save_start.at[-1])


class SaveStart(transformers.TrainerCallback):
    """Before DetCallback: notes when the Trainer's own save has ended."""

    def __init__(self) -> None:
        self.at: list[float] = []

    def on_save(self, args, state, control, **kwargs):
        self.at.append(time.perf_counter())


def train(core_context, args, model, data, with_det: bool, clock: Clock) -> None:
    callbacks = [clock.save_start] + ([DetCallback(core_context, args)] if with_det else [])
    # The evaluation DetCallback asks for when training ends needs a dataset; it runs after
    # the measured steps and saves.
    trainer = transformers.Trainer(
        model=model, args=args, train_dataset=data, eval_dataset=data, callbacks=callbacks
    )
    # After DetCallback: what it does at a step or a save is inside the measured time.
    trainer.add_callback(clock)
    trainer.train()


BLOCK = 20  # steps


class Gate(transformers.TrainerCallback):
    """DetCallback in every other block of BLOCK steps: each event of a step in an "on"
    block is handed to it, an "off" block's to a callback that does nothing (the start and
    end of training always go to DetCallback). Neighbouring blocks run under the same load
    on the machine, so comparing them cancels the drift that makes separate runs differ by
    several percent."""

    ALWAYS = ("on_init_end", "on_train_begin", "on_train_end", "on_epoch_begin", "on_epoch_end")

    def __init__(self, inner: DetCallback, first_on: bool) -> None:
        self.inner = inner
        # What "off" blocks hand their events to: the same dispatch, no work.
        self.idle = transformers.TrainerCallback()
        self.first_on = first_on
        self.active = first_on


def _forward(name: str):
    def event(self, args, state, control, **kwargs):
        if name == "on_step_begin":
            self.active = (state.global_step // BLOCK % 2 == 0) == self.first_on
        target = self.inner if self.active or name in Gate.ALWAYS else self.idle
        return getattr(target, name)(args, state, control, **kwargs)

    return event


for _name in dir(transformers.TrainerCallback):
    if _name.startswith("on_"):
        setattr(Gate, _name, _forward(_name))


class Blocks(transformers.TrainerCallback):
    """Last callback: the wall and process CPU time at the end of each block, and whether
    DetCallback was on in it."""

    def __init__(self, gate: Gate) -> None:
        self.gate = gate
        self.marks: list[tuple[float, float, bool]] = []

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step % BLOCK == 0:
            self.marks.append((time.perf_counter(), time.process_time(), self.gate.active))


def arguments(output_dir: pathlib.Path, **overrides) -> transformers.TrainingArguments:
    """The Trainer's arguments: batches of 8 on the CPU, no evaluation or save unless
    ``overrides`` say so."""
    defaults = {
        "per_device_train_batch_size": 8,
        "eval_strategy": "no",
        "save_strategy": "no",
        "report_to": "none",
        "disable_tqdm": True,
        "dataloader_pin_memory": False,
        "use_cpu": True,
    }
    return transformers.TrainingArguments(output_dir=str(output_dir), **{**defaults, **overrides})


def steps(core_context, out: pathlib.Path, rounds: int, n: int) -> None:
    tokenizer = tiny_lm.build_tokenizer()
    data = tiny_lm.SumsDataset(tokenizer, 8 * n, 1, 16)
    args = arguments(out / "steps", max_steps=n, logging_strategy="steps", logging_steps=10)
    wall: dict[str, list[float]] = {"without": [], "with": []}
    cpu: dict[str, list[float]] = {"without": [], "with": []}
    for r in range(rounds):
        gate = Gate(DetCallback(core_context, args), first_on=r % 2 == 1)
        blocks = Blocks(gate)
        trainer = transformers.Trainer(
            model=tiny_lm.build_model(tokenizer, seed=0),
            args=args,
            train_dataset=data,
            eval_dataset=data,
            callbacks=[gate, blocks],
        )
        trainer.train()
        # The first two blocks warm up.
        for (t0, c0, _), (t1, c1, on) in zip(blocks.marks[2:], blocks.marks[3:], strict=False):
            side = "with" if on else "without"
            wall[side].append((t1 - t0) / BLOCK)
            cpu[side].append((c1 - c0) / BLOCK)
    (out / "steps.json").write_text(json.dumps({"steps": n, "wall": wall, "cpu": cpu}))


def save(core_context, out: pathlib.Path, reps: int, mib: int) -> None:
    tokenizer = tiny_lm.build_tokenizer()
    data = tiny_lm.SumsDataset(tokenizer, 64, 1, 16)
    model = tiny_lm.build_model(tokenizer, seed=0)
    # MIB MiB of frozen weights: saved with the model, never trained.
    bulk = torch.nn.Parameter(torch.ones(mib * 1024 * 256), requires_grad=False)
    model.register_parameter("bulk", bulk)
    times: dict[str, list[float]] = {"without": [], "with": []}
    on_save: list[float] = []
    for r in range(reps):
        order = ("without", "with") if r % 2 == 0 else ("with", "without")
        for side in order:
            args = arguments(
                out / f"save-{side}-{r}",
                max_steps=1,
                save_strategy="steps",
                save_steps=1,
                save_only_model=True,
                logging_strategy="no",
            )
            # Every save starts with nothing left to write back from the one before.
            os.sync()
            clock = Clock()
            train(core_context, args, model, data, side == "with", clock)
            times[side].append(clock.saves[0])
            if side == "with":
                on_save.append(clock.in_callbacks[0])
            for path in (out / f"save-{side}-{r}").rglob("*.safetensors"):
                path.unlink()
    (out / "save.json").write_text(json.dumps({"mib": mib, **times, "on_save": on_save}))
    print("save medians", {k: statistics.median(v) for k, v in times.items()}, flush=True)


def main() -> None:
    what, out = sys.argv[1], pathlib.Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    info = det.get_cluster_info()
    assert info is not None
    with det.core.init() as core_context:
        if what == "steps":
            steps(core_context, out, int(sys.argv[3]), int(sys.argv[4]))
        else:
            save(core_context, out, int(sys.argv[3]), int(sys.argv[4]))


if __name__ == "__main__":
    main()
