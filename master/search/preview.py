"""What a search will run, without running it (``det preview-search``).

The answer is a list of ``(number of trials, length)``: how many trials train to each length,
shortest first, in ``unit`` ("batches", "records", "epochs", or "" for a bare number). Single,
random, grid, optuna and pbt searches are counted directly (an optuna pruner stops some trials
earlier, depending on their results). Adaptive ASHA is simulated: its own search method is
driven with random metrics from the experiment seed (0 when none is set), one trial
operation at a time, as Determined's preview does; the counts per length follow from the
promotion rule and barely depend on the metrics.
"""

from __future__ import annotations

import collections
import random

from determined.common import expconf
from pydet.master.search.adaptive import AdaptiveASHASearch
from pydet.master.search.base import Close, Create, Operation, Shutdown, Stop, ValidateAfter
from pydet.master.search.base import max_length_units as _max_length_units
from pydet.master.search.grid import grid_size

Entries = list[tuple[int, int]]
_UNITS = ("batches", "records", "epochs")
# A simulation of this many steps has gone wrong; a real search is orders of magnitude smaller.
_MAX_STEPS = 10_000_000


def preview(config: expconf.ExperimentConfig) -> tuple[Entries, str]:
    searcher = config.searcher
    length = _max_length_units(searcher)
    if isinstance(searcher, expconf.SingleSearcher):
        return [(1, length)], _unit(searcher.max_length)
    if isinstance(searcher, expconf.RandomSearcher):
        return [(searcher.max_trials, length)], _unit(searcher.max_length)
    if isinstance(searcher, expconf.GridSearcher):
        return [(grid_size(config.hyperparameters), length)], _unit(searcher.max_length)
    if isinstance(searcher, expconf.OptunaSearcher):
        # At most: a pruner stops some trials earlier, depending on their results.
        return [(searcher.max_trials, length)], _unit(searcher.max_length)
    if isinstance(searcher, expconf.PBTSearcher):
        return pbt_entries(searcher), _unit(searcher.length_per_round)
    if isinstance(searcher, expconf.UnsupportedSearcher):
        raise ValueError(f"no preview for the {searcher.name} searcher")
    if searcher.time_metric is not None:
        unit = searcher.time_metric if searcher.time_metric in _UNITS else ""
    else:
        unit = _unit(searcher.max_length)
    return simulate(config), unit


def pbt_entries(searcher: expconf.PBTSearcher) -> Entries:
    """Trials by the length they end at: after each round but the last, the replaced ones
    end at that round's length; the final population trains every round's length. A child
    starts at its parent's checkpoint, so lengths are counted from the population's start."""
    per_round = searcher.length_per_round.value
    entries: Entries = []
    replaced = searcher.replaced_per_round
    for k in range(1, searcher.num_rounds):
        entries.append((replaced, k * per_round))
    entries.append((searcher.population_size, searcher.num_rounds * per_round))
    return entries


def concurrency(config: expconf.ExperimentConfig) -> int:
    """How many trials run at once at most; 0 when the searcher sets no limit."""
    searcher = config.searcher
    if isinstance(searcher, expconf.SingleSearcher):
        return 1
    if isinstance(searcher, expconf.PBTSearcher):
        return searcher.population_size
    return int(getattr(searcher, "max_concurrent_trials", 0) or 0)


def _unit(length: expconf.Length | None) -> str:
    return "" if length is None or length.unit is None else length.unit


def simulate(config: expconf.ExperimentConfig) -> Entries:
    """Runs an adaptive ASHA search to its end with random metrics and counts the trials by
    the length each trained to."""
    seed = config.reproducibility.experiment_seed or 0
    search = AdaptiveASHASearch(config, seed)
    metrics = random.Random(seed)
    time_metric, metric = search.time_metric, search.metric
    # Stop-driven trials validate at every rung length: that is where decisions are made.
    checkpoints = sorted({n for b in search.brackets for n in b.lengths})
    trained: dict[str, int] = {}
    target: dict[str, int] = {}
    ready: collections.deque[str] = collections.deque()
    ops: collections.deque[Operation] = collections.deque(search.initial_operations())
    for _ in range(_MAX_STEPS):
        if ops:
            op = ops.popleft()
            if isinstance(op, Create):
                trained[op.request_id] = 0
                ops.extend(search.on_trial_created(op.request_id))
            elif isinstance(op, ValidateAfter):
                target[op.request_id] = op.length
                ready.append(op.request_id)
            elif isinstance(op, Close | Stop):
                ops.extend(search.on_trial_closed(op.request_id))
            elif isinstance(op, Shutdown):
                break
            continue
        if not ready:
            break
        rid = ready.popleft()
        if time_metric is None:
            trained[rid] = target[rid]
            ops.extend(search.on_validation_completed(rid, metrics.random(), target[rid]))
            continue
        for t in [c for c in checkpoints if trained[rid] < c <= target[rid]]:
            trained[rid] = t
            reported = search.on_validation_reported(
                rid, {time_metric: t, metric: metrics.random()}, t
            )
            ops.extend(reported)
            if any(isinstance(o, Stop) and o.request_id == rid for o in reported):
                break
        else:
            ops.extend(search.on_validation_completed(rid, metrics.random(), target[rid]))
    else:
        raise RuntimeError("the search preview did not finish")
    counts = collections.Counter(trained.values())
    return sorted(((n, length) for length, n in counts.items()), key=lambda e: e[1])
