"""Search quality: the best value each search reaches, and its wall time, on one synthetic
objective with one trial budget, pydet's searchers beside Ray Tune's.

The workload: ``--trials`` (20) trials of a synthetic objective of three hyperparameters
(``x`` and ``y`` uniform in [0, 1], ``lr`` log-uniform in [1e-4, 1e-1]; minimum 0.3 / steps
at x=0.3, y=0.7, lr=10**-2.5), each step a ``--work-ms`` (20 ms) sleep, at most ``--steps``
(9) steps a trial, ``--concurrency`` (2) trials at a time (a local pydet cluster of one agent
with that many slots; ``ray.init(num_cpus=concurrency)``). The trial is
``bench/_search_quality/trial.py``; Ray's function trainable computes the same objective.

Rows (each labelled with what it changes):

- pydet random; pydet optuna (TPE, Optuna's default start-up of 10 random trials);
  pydet adaptive_asha (one bracket, divisor 3, rungs at 1, 3 and 9 steps, ``stop_once``:
  decides once per rung, as Ray's ASHA does);
- pydet optuna warm-started (``searcher.source_experiment_id``) from the random search's
  trials: the same budget of new trials, the old ones modelled, not re-run;
- Ray Tune ``OptunaSearch`` (TPE) with the FIFO scheduler; Ray Tune random search
  (``BasicVariantGenerator``) with ``ASHAScheduler`` (same divisor, grace period and length);
  each at Ray's defaults (a new worker process per trial) and at its fastest documented
  setting, ``reuse_actors=True`` (one process runs many trials).

"Best value" is the smallest ``val_loss`` any trial reported (the search's best trial; lower
is better). Each search is seeded (``--seed``); one seed is one sample of a noisy quantity,
so small differences mean nothing. Wall time excludes cluster and Ray start-up.

    python3 bench/search_quality.py [--trials 20] [--steps 9] [--work-ms 20]
                                    [--concurrency 2] [--seed 1]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import math
import os
import pathlib
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tabulate import tabulate  # type: ignore[import-untyped]  # noqa: E402

from bench import search  # noqa: E402
from bench.search import DIVISOR, RUNGS, BenchCluster, run_pydet_search  # noqa: E402
from determined.api.gen import v1  # noqa: E402
from determined.common import client, context  # noqa: E402

WORKLOAD = ROOT / "bench" / "_search_quality"


@dataclass(frozen=True)
class Workload(search.Workload):
    """bench/search.py's workload, seeded: the searches' seeds decide which points they try."""

    seed: int


@dataclass(frozen=True)
class Row:
    peer: str
    setting: str
    changes: str
    best: float | None
    wall: float
    trials: int
    steps: int  # total steps trained


def objective(x: float, y: float, lr: float, step: int) -> float:
    """bench/_search_quality/trial.py's objective, for Ray's trials."""
    return (x - 0.3) ** 2 + (y - 0.7) ** 2 + 0.1 * (math.log10(lr) + 2.5) ** 2 + 0.3 / step


# -- pydet ----------------------------------------------------------------------------------------


def pydet_config(w: Workload, searcher: dict[str, Any]) -> str:
    cfg = {
        "name": f"bench-quality-{searcher['name']}",
        "entrypoint": "python3 trial.py",
        "hyperparameters": {
            "x": {"type": "double", "minval": 0.0, "maxval": 1.0},
            "y": {"type": "double", "minval": 0.0, "maxval": 1.0},
            "lr": {"type": "log", "base": 10, "minval": -4, "maxval": -1},
            "work_s": w.work_s,
        },
        "searcher": {
            "metric": "val_loss",
            "max_length": w.steps,
            "max_trials": w.trials,
            "max_concurrent_trials": w.concurrency,
            **searcher,
        },
        "max_restarts": 0,
        "reproducibility": {"experiment_seed": w.seed},
    }
    return json.dumps(cfg)  # JSON is YAML


async def pydet_result(address: str, token: str, exp_id: int) -> tuple[float | None, int, int]:
    async with client.session(address, token=token) as s:
        exp = (
            await s.call(s.stub.get_experiment(v1.GetExperimentRequest(experiment_id=exp_id)))
        ).experiment
        trials = (
            await s.call(
                s.stub.get_experiment_trials(v1.GetExperimentTrialsRequest(experiment_id=exp_id))
            )
        ).trials
    assert exp is not None
    return exp.best_trial_searcher_metric, len(trials), sum(t.steps_completed for t in trials)


def run_pydet(w: Workload) -> list[Row]:
    rows = []
    searches: list[tuple[str, str, dict[str, Any]]] = [
        ("random", "independent uniform samples", {"name": "random"}),
        ("optuna TPE", "a model of the results so far proposes each trial", {"name": "optuna"}),
        (
            "adaptive_asha",
            f"random trials, stopped early at rungs 1/{DIVISOR}/{DIVISOR**2} of max steps",
            {
                "name": "adaptive_asha",
                "mode": "aggressive",
                "divisor": DIVISOR,
                "max_rungs": RUNGS,
                "stop_once": True,
            },
        ),
        ("optuna TPE, warm start", "TPE seeded with the random row's trials (not re-run)", {}),
    ]
    with tempfile.TemporaryDirectory(prefix="pydet-bench-quality-") as tmp:
        cluster = BenchCluster(pathlib.Path(tmp))
        try:
            cluster.start_master()
            cluster.start_agent("agent-0", w.concurrency)
            ctx = context.pack_context(WORKLOAD)
            random_id = 0
            for setting, changes, searcher in searches:
                if not searcher:
                    searcher = {"name": "optuna", "source_experiment_id": random_id}
                exp_id, wall = asyncio.run(
                    run_pydet_search(cluster.address, cluster.token, ctx, pydet_config(w, searcher))
                )
                if setting == "random":
                    random_id = exp_id
                best, n, steps = asyncio.run(pydet_result(cluster.address, cluster.token, exp_id))
                rows.append(Row("pydet", setting, changes, best, wall, n, steps))
                print(f"pydet {setting}: {wall:.1f}s", file=sys.stderr, flush=True)
        except BaseException:
            print(cluster.dump_logs(), file=sys.stderr)
            raise
        finally:
            cluster.close()
    return rows


# -- Ray Tune -----------------------------------------------------------------------------------


def ray_trainable(config: dict[str, Any]) -> None:
    from ray import tune

    x, y, lr = float(config["x"]), float(config["y"]), float(config["lr"])
    for step in range(1, int(config["steps"]) + 1):
        time.sleep(float(config["work_s"]))
        tune.report({"val_loss": objective(x, y, lr, step), "steps": step})


def run_ray(w: Workload) -> list[Row] | str:
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
    try:
        import ray
        from ray import tune
        from ray.tune.schedulers import ASHAScheduler
        from ray.tune.search.optuna import OptunaSearch
    except ImportError as e:
        return f"Ray Tune is not installed ({e}); only pydet ran. pip install 'ray[tune]' optuna"
    os.environ.setdefault("RAY_agent_register_timeout_ms", "120000")
    ray.init(
        num_cpus=w.concurrency,
        include_dashboard=False,
        log_to_driver=False,
        logging_level=logging.ERROR,
    )
    rows = []
    space = {
        "x": tune.uniform(0.0, 1.0),
        "y": tune.uniform(0.0, 1.0),
        "lr": tune.loguniform(1e-4, 1e-1),
        "work_s": w.work_s,
        "steps": w.steps,
    }
    peers: list[tuple[str, str, Any, Any]] = [
        (
            "OptunaSearch (TPE), FIFO",
            "Optuna's TPE through Ray's search-algorithm adapter; every trial runs to the end",
            lambda: OptunaSearch(seed=w.seed),
            None,
        ),
        (
            "random, ASHAScheduler",
            f"random trials stopped early (grace 1, reduction {DIVISOR}, max_t {w.steps})",
            lambda: None,
            lambda: ASHAScheduler(
                time_attr="training_iteration",
                max_t=w.steps,
                grace_period=1,
                reduction_factor=DIVISOR,
                brackets=1,
            ),
        ),
    ]
    try:
        with tempfile.TemporaryDirectory(prefix="ray-bench-quality-") as tmp:
            runs = [
                (f"{setting}{mode}", changes + extra, search_alg, scheduler, reuse)
                for setting, changes, search_alg, scheduler in peers
                for mode, extra, reuse in (
                    ("", "; defaults: a new worker process per trial", False),
                    (", reuse_actors", "; fastest: one process runs many trials", True),
                )
            ]
            for setting, changes, search_alg, scheduler, reuse in runs:
                tuner = tune.Tuner(
                    ray_trainable,
                    param_space=space,
                    tune_config=tune.TuneConfig(
                        metric="val_loss",
                        mode="min",
                        num_samples=w.trials,
                        max_concurrent_trials=w.concurrency,
                        search_alg=search_alg(),
                        scheduler=scheduler() if scheduler else None,
                        reuse_actors=reuse,
                    ),
                    run_config=tune.RunConfig(name="quality", storage_path=tmp, verbose=0),
                )
                t0 = time.monotonic()
                grid = tuner.fit()
                wall = time.monotonic() - t0
                best = grid.get_best_result(metric="val_loss", mode="min", scope="all")
                frame = grid.get_dataframe()
                steps = int(frame["training_iteration"].sum())
                value = (
                    best.metrics_dataframe["val_loss"].min()
                    if best.metrics_dataframe is not None
                    else None
                )
                rows.append(
                    Row("Ray Tune", setting, changes, float(value), wall, len(frame), steps)
                )
                print(f"ray {setting}: {wall:.1f}s", file=sys.stderr, flush=True)
    finally:
        ray.shutdown()
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=20)
    p.add_argument("--steps", type=int, default=9)
    p.add_argument("--work-ms", type=float, default=20.0)
    p.add_argument("--concurrency", type=int, default=2)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    w = Workload(args.trials, args.steps, args.work_ms / 1000, args.concurrency, args.seed)
    rows = run_pydet(w)
    ray_rows = run_ray(w)
    note = ray_rows if isinstance(ray_rows, str) else ""
    if not isinstance(ray_rows, str):
        rows += ray_rows
    print(
        f"Workload: {w.trials} trials of at most {w.steps} steps x {args.work_ms:g} ms, "
        f"{w.concurrency} at a time, seed {w.seed}; objective minimum "
        f"{0.3 / w.steps:.4f} (at max steps). Lower best value is better."
    )
    table = [
        [
            r.peer,
            r.setting,
            r.changes,
            "-" if r.best is None else f"{r.best:.4f}",
            f"{r.wall:.1f}",
            r.trials,
            r.steps,
        ]
        for r in rows
    ]
    headers = ["Peer", "Setting", "What it changes", "Best value", "Wall s", "Trials", "Steps"]
    print(tabulate(table, headers=headers, tablefmt="presto", disable_numparse=True))
    if note:
        print(note)


if __name__ == "__main__":
    main()
