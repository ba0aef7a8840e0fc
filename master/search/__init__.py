"""Hyperparameter search: pure, deterministic search methods (``searcher`` is what the
master imports) and the preview of a search's trials and lengths (``preview``)."""
