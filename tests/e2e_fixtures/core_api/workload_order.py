"""Reports training metrics, validation metrics and checkpoints in every order: step N does
the N-th ordered selection of them (none, each alone, each pair both ways, all three every
way), so each kind is reported at 11 steps. pydet's counterpart of Determined's e2e
``core_api/arbitrary_workload_order`` fixture."""

from __future__ import annotations

import itertools

import determined as det

KINDS = ("train", "val", "ckpt")


def orders() -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    for size in range(len(KINDS) + 1):
        for chosen in itertools.combinations(KINDS, size):
            out.extend(itertools.permutations(chosen))
    return out


with det.core.init() as core_context:
    for step, order in enumerate(orders()):
        for kind in order:
            if kind == "train":
                core_context.train.report_training_metrics(
                    steps_completed=step, metrics={"x": step}
                )
            elif kind == "val":
                core_context.train.report_validation_metrics(
                    steps_completed=step, metrics={"x": step}
                )
            else:
                with core_context.checkpoint.store_path({"steps_completed": step}) as (path, _):
                    (path / "state").write_text(f"step: {step}")
