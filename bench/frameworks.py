"""What the framework integrations cost, on a real local cluster.

Prints one table. For ``determined.transformers.DetCallback`` (the ``transformers`` rows):

1. Its cost per Trainer step: a tiny GPT-2 (``examples/hf_trainer_api/tiny_lm.py``, one
   thread, about 100 steps/s on a quiet CPU) is trained by one ``Trainer`` (logging every
   10 steps) with ``DetCallback`` on in every other block of 20 steps and off in the
   others, in runs that alternate which comes first: neighbouring blocks share the
   machine's load, where separate runs on a busy machine differ by several percent. The
   cost is the mean step time of the "on" blocks over that of the "off" blocks, minus 1:
   every block counts, so the hand-over of reports to the Core API (once a second) is in.
2. A checkpoint save of 1 GiB of weights (safetensors) by the Trainer alone, and the same
   save through ``DetCallback`` into a ``shared_fs`` checkpoint storage on the same disk
   (the Trainer's save plus ``DetCallback.on_save``: the checkpoint placed in storage and
   reported to the master), alternating, medians, the disk synced before each. Writing
   1 GiB takes from under one to several seconds on a shared disk, so the end-to-end
   difference is mostly noise; the target is checked on the time measured inside
   ``DetCallback.on_save`` (callbacks before and after it note the time), which is all
   that DetCallback adds to a save, against the Trainer's own save.

Wall-clock numbers depend on what else the machine is doing: the load average is printed
with the table.

    python3 bench/frameworks.py [--rounds 4] [--steps 1000] [--reps 3] [--mib 1024]
                                [--only hf-steps,hf-save]

Needs the frameworks (``scripts/frameworks/install.sh``). The programs the trials run are
in ``bench/_frameworks/``.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from core_api import (  # noqa: E402
    PY,
    Bench,
    BenchCluster,
    command,
    parse_with_only,
    table,
    yes,
)

from determined.common import context  # noqa: E402

WORKLOADS = ROOT / "bench" / "_frameworks"
TINY_LM = ROOT / "examples" / "hf_trainer_api" / "tiny_lm.py"
SECTIONS = ("hf-steps", "hf-save")


def config(entrypoint: str, *, storage: pathlib.Path | None = None) -> str:
    """A one-trial experiment; no searcher length (DetCallback refuses one that disagrees
    with the Trainer's own)."""
    cfg: dict[str, Any] = {
        "name": "bench-frameworks",
        "entrypoint": entrypoint,
        "searcher": {"name": "single", "metric": "eval_loss"},
        "max_restarts": 0,
    }
    if storage is not None:
        cfg["checkpoint_storage"] = {"type": "shared_fs", "host_path": str(storage)}
    return json.dumps(cfg)  # JSON is YAML


def hf_steps(bench: Bench, root: pathlib.Path, rounds: int, steps: int) -> dict[str, float]:
    out = root / "hf-steps"
    bench.run(config(command(PY, "hf_trial.py", "steps", out, rounds, steps)))
    data = json.loads((out / "steps.json").read_text())
    wall, cpu = data["wall"], data["cpu"]
    return {
        "without": statistics.median(wall["without"]),
        "with": statistics.median(wall["with"]),
        # Every block counts: a hand-over to the Core API falls in one block of several.
        "cost": statistics.mean(wall["with"]) / statistics.mean(wall["without"]) - 1,
        "cpu_cost": statistics.mean(cpu["with"]) / statistics.mean(cpu["without"]) - 1,
        "blocks": len(wall["with"]) + len(wall["without"]),
    }


def hf_save(bench: Bench, root: pathlib.Path, reps: int, mib: int) -> dict[str, float]:
    out = root / "hf-save"
    storage = root / "checkpoints"
    bench.run(config(command(PY, "hf_trial.py", "save", out, reps, mib), storage=storage))
    data = json.loads((out / "save.json").read_text())
    return {
        "without": statistics.median(data["without"]),
        "with": statistics.median(data["with"]),
        "on_save": statistics.median(data["on_save"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=4, help="Trainer runs (steps)")
    parser.add_argument("--steps", type=int, default=1000, help="Trainer steps per run")
    parser.add_argument("--reps", type=int, default=3, help="saves per side")
    parser.add_argument("--mib", type=int, default=1024, help="MiB of weights per save")
    args, only = parse_with_only(parser, SECTIONS)

    began = time.monotonic()
    loads = [os.getloadavg()[0]]
    steps: dict[str, float] = {}
    save: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="pydet-bench-frameworks-") as tmp:
        root = pathlib.Path(tmp)
        ctx = root / "context"
        shutil.copytree(WORKLOADS, ctx, ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copy(TINY_LM, ctx / TINY_LM.name)
        cluster = BenchCluster(root)
        try:
            cluster.start_master()
            cluster.start_agent("agent-0", slots=1)
            bench = Bench(cluster, context.pack_context(ctx))
            if "hf-steps" in only:
                steps = hf_steps(bench, root, args.rounds, args.steps)
                loads.append(os.getloadavg()[0])
            if "hf-save" in only:
                save = hf_save(bench, root, args.reps, args.mib)
                loads.append(os.getloadavg()[0])
        except BaseException:
            print(cluster.dump_logs(), file=sys.stderr)
            raise
        finally:
            cluster.close()
    total = time.monotonic() - began

    rows: list[tuple[str, str, str, str]] = []
    if steps:
        rows += [
            (
                "transformers: Trainer step, DetCallback off, median",
                f"{steps['without'] * 1e3:.2f} ms ({1 / steps['without']:.0f} steps/s)",
                "",
                "",
            ),
            (
                "transformers: Trainer step, DetCallback on, median",
                f"{steps['with'] * 1e3:.2f} ms ({1 / steps['with']:.0f} steps/s)",
                "",
                "",
            ),
            (
                "transformers: DetCallback's CPU per step (process, every thread)",
                f"{steps['cpu_cost']:+.2%}",
                "",
                "",
            ),
            (
                "transformers: DetCallback's cost per step (wall, mean of all blocks)",
                f"{steps['cost']:+.2%}",
                "<= 1%",
                yes(steps["cost"] <= 0.01),
            ),
        ]
    if save:
        gib = args.mib / 1024
        rows += [
            (
                f"transformers: Trainer save of {gib:g} GiB of weights, median",
                f"{save['without']:.2f} s",
                "",
                "",
            ),
            (
                "transformers: same save through DetCallback (shared_fs, same disk)",
                f"{save['with']:.2f} s",
                "",
                "",
            ),
            (
                "  of which in DetCallback.on_save (placed in storage, reported), median",
                f"{save['on_save'] * 1e3:.0f} ms",
                "",
                "",
            ),
            (
                "transformers: end to end, through DetCallback / Trainer alone",
                f"{save['with'] / save['without'] - 1:+.1%}",
                "",
                "",
            ),
            (
                "transformers: time DetCallback adds to a save / Trainer save",
                f"+{save['on_save'] / save['without']:.1%}",
                "<= +10%",
                yes(save["on_save"] <= 0.1 * save["without"]),
            ),
        ]
    print(table(rows))
    print(
        f"(1 master + 1 agent, process runtime, log level info; {os.cpu_count()} CPUs, load "
        f"average {' -> '.join(f'{x:.1f}' for x in loads)}; {args.rounds} runs of "
        f"{args.steps} steps in blocks of 20; median of {args.reps} saves per side; "
        f"{total:.0f} s in all)"
    )


if __name__ == "__main__":
    main()
