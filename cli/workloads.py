"""What `det experiment describe` adds with Determined's ``--metrics``, ``--csv`` and
``--outdir``: each trial's workloads (one row per step at which it reported training or
validation metrics or a checkpoint), and the tables written as CSV, to the terminal or to
``experiments.csv``, ``trials.csv`` and ``workloads.csv`` in a directory."""

from __future__ import annotations

import json
import math
import pathlib
import sys
from collections.abc import Sequence
from typing import Any

from determined.api.gen import v1
from determined.common import errors
from pydet.cli import render


def scalar_names(reports: Sequence[v1.MetricReport], group: str) -> list[str]:
    """The metric names of ``group`` whose values are numbers, sorted."""
    names: set[str] = set()
    for r in reports:
        if r.group != group:
            continue
        for key, value in json.loads(r.metrics or "{}").items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                names.add(key)
    return sorted(names)


def headers(training: Sequence[str], validation: Sequence[str]) -> list[str]:
    return [
        "Trial ID",
        "# of Batches",
        "Report Time",
        *(f"Training Metric: {n}" for n in training),
        "Checkpoint",
        "Checkpoint Report Time",
        "Validation Report Time",
        *(f"Validation Metric: {n}" for n in validation),
    ]


def rows(
    trial_id: int,
    reports: Sequence[v1.MetricReport],
    checkpoints: Sequence[v1.Checkpoint],
    training: Sequence[str],
    validation: Sequence[str],
) -> list[list[Any]]:
    """One row per step of the trial, training, checkpoint and validation side by side."""
    steps = sorted(
        {r.steps_completed for r in reports if r.group in ("training", "validation")}
        | {c.steps_completed for c in checkpoints}
    )
    by_step: dict[tuple[str, int], v1.MetricReport] = {
        (r.group, r.steps_completed): r for r in reports
    }
    ckpt_at = {c.steps_completed: c for c in checkpoints}
    out = []
    for step in steps:
        t = by_step.get(("training", step))
        v = by_step.get(("validation", step))
        c = ckpt_at.get(step)
        t_metrics = json.loads(t.metrics or "{}") if t else {}
        v_metrics = json.loads(v.metrics or "{}") if v else {}
        times = [x.timestamp for x in (t, v) if x is not None] + ([c.report_time] if c else [])
        out.append(
            [
                trial_id,
                step,
                render.local_time(max(render.seconds(x) for x in times)) if times else "",
                *(_number(t_metrics.get(n)) for n in training),
                c.uuid if c else "",
                render.local_time(c.report_time) if c else "",
                render.local_time(v.timestamp) if v else "",
                *(_number(v_metrics.get(n)) for n in validation),
            ]
        )
    return out


def _number(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    return "" if value is None else value


def emit(
    name: str,
    title: str,
    head: Sequence[str],
    body: Sequence[Sequence[Any]],
    *,
    as_csv: bool,
    outdir: pathlib.Path | None,
) -> None:
    """A table (CSV with ``as_csv``) under ``title`` on stdout, or CSV in ``outdir/name``,
    as Determined's describe writes them."""
    text = render.csv(head, body) if as_csv or outdir else render.table(head, body) + "\n"
    if outdir is None:
        if title:
            print(title)
        sys.stdout.write(text)
        return
    try:
        outdir.mkdir(parents=True, exist_ok=True)
        (outdir / name).write_text(text)
    except OSError as e:
        raise errors.InvalidArgument(
            f"--outdir {outdir}: cannot write {name}: {e.strerror}"
        ) from None
