"""Search methods: pure and deterministic. Given the config, the seed and the same events,
they make the same decisions, and their whole state round-trips through JSON so that a
restarted master continues a search exactly where it was.

This module is what the master imports: the operations, the :class:`SearchMethod` contract
(see :mod:`master.search.base` for the events and what each operation asks of the master) and
:func:`new_search`. Each method lives in its own module: ``search_simple`` (single, random),
``search_grid``, ``search_asha`` (one ASHA bracket), ``search_adaptive`` (adaptive ASHA) and
``optuna_study`` (model-based search through Optuna) and ``pbt`` (population-based
training).
"""

from __future__ import annotations

from determined.common import expconf
from pydet.master.search.adaptive import AdaptiveASHASearch
from pydet.master.search.base import (
    EXIT_REASONS,
    Close,
    Create,
    Operation,
    SearchMethod,
    Shutdown,
    Stop,
    ValidateAfter,
    max_length_units,
    sample_hparams,
    searcher_value,
)
from pydet.master.search.grid import GridSearch, grid_points, grid_values
from pydet.master.search.pbt import PBTSearch
from pydet.master.search.simple import RandomSearch, SingleSearch

__all__ = [
    "EXIT_REASONS",
    "AdaptiveASHASearch",
    "Close",
    "Create",
    "GridSearch",
    "Operation",
    "PBTSearch",
    "RandomSearch",
    "SearchMethod",
    "Shutdown",
    "SingleSearch",
    "Stop",
    "ValidateAfter",
    "grid_points",
    "grid_values",
    "max_length_units",
    "new_search",
    "sample_hparams",
    "searcher_value",
]


def new_search(config: expconf.ExperimentConfig, seed: int) -> SearchMethod:
    """The search method the config's ``searcher.name`` asks for, seeded with ``seed``."""
    searcher = config.searcher
    if isinstance(searcher, expconf.SingleSearcher):
        return SingleSearch(config, seed)
    if isinstance(searcher, expconf.RandomSearcher):
        return RandomSearch(config, seed)
    if isinstance(searcher, expconf.GridSearcher):
        return GridSearch(config, seed)
    if isinstance(searcher, expconf.OptunaSearcher):
        # Imported here: Optuna takes half a second to import, and only its searches need it.
        from pydet.master.search.optuna_study import OptunaSearch

        return OptunaSearch(config, seed)
    if isinstance(searcher, expconf.PBTSearcher):
        return PBTSearch(config, seed)
    if isinstance(searcher, expconf.UnsupportedSearcher):
        # Experiments.validate refuses these before a search is made.
        raise ValueError(f"no search method for the {searcher.name} searcher")
    return AdaptiveASHASearch(config, seed)
