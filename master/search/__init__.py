"""Hyperparameter search: pure, deterministic search methods (``searcher`` is what the
master imports) and the preview of a search's trials and lengths (``preview``).

May use: nothing of the master (Optuna is a library it wraps); a contract keeps it away
from the store and every I/O subsystem.
"""
