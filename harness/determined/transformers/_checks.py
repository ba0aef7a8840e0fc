"""What ``DetCallback`` checks and how it turns the Trainer's logs into metric reports.

Pure functions of the searcher config, the Trainer's length arguments and its log dicts, so
they are tested without the Trainer. The error messages are Determined's (one with its
unclosed parenthesis closed), so that a script moved from Determined fails with the words
its author already searched for.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

EVAL = "eval_"
TEST = "test_"
TRAIN = "train_"

# The Trainer's speed figures (``train_runtime``, ``eval_samples_per_second``...): they
# describe the run, not the model, and are not reported.
SPEED_SUFFIXES = ("_runtime", "_per_second", "_compilation_time")

# ``time_metric`` values DetCallback fills in itself with every report.
BUILTIN_TIME_METRICS = ("batches", "epochs")


def metric_type(logs: Mapping[str, Any]) -> str:
    """``EVAL`` for an evaluation's logs, ``TEST`` for a prediction's, else ``TRAIN``."""
    if any(k.startswith(EVAL) for k in logs):
        return EVAL
    if any(k.startswith(TEST) for k in logs):
        return TEST
    return TRAIN


def report_metrics(logs: Mapping[str, Any], filter_metrics: Iterable[str] | None) -> dict[str, Any]:
    """The metrics to report from one ``on_log``: a copy of ``logs`` without the rounded
    ``epoch`` and the speed figures; with ``filter_metrics``, only the names that contain
    one of its entries."""
    wanted = list(filter_metrics or ())
    out: dict[str, Any] = {}
    for name, value in logs.items():
        if name == "epoch" or name.endswith(SPEED_SUFFIXES):
            continue
        if wanted and not any(w in name for w in wanted):
            continue
        out[name] = value
    return out


def training_length(max_steps: int, num_train_epochs: float) -> tuple[str, float, str]:
    """The Trainer's length as ``(unit, length, flag)``: ``max_steps`` wins over epochs, as in
    the Trainer itself."""
    if max_steps > -1:
        return "batches", max_steps, "--max_steps"
    return "epochs", num_train_epochs, "--num_train_epochs"


def check_searcher_config(
    searcher: Mapping[str, Any], max_steps: int, num_train_epochs: float
) -> list[str]:
    """Refuse a searcher config that disagrees with the Trainer's own length; return the
    metrics every validation must then carry (besides ``searcher.metric``)."""
    unit, length, flag = training_length(max_steps, num_train_epochs)
    max_length = searcher.get("max_length")
    required: list[str] = []
    if isinstance(max_length, int) and not isinstance(max_length, bool):
        raise ValueError(
            "HF trainer no longer respects the deprecated searcher.max_length field.  "
            "searcher.max_length is deprecated; please remove it and rely on "
            f"{flag} instead to avoid ambiguous training specifications."
        )
    if isinstance(max_length, dict) and max_length:
        search_unit, search_len = next(iter(max_length.items()))
        if (search_unit, search_len) != (unit, length):
            raise ValueError(
                "HF trainer units does not match configured searcher.max_length "
                f"({unit}={_number(length)} != {search_unit}={search_len}).  The "
                "searcher.max_length field is deprecated; please remove it and avoid "
                "ambiguous training specifications."
            )
    elif searcher.get("name") in ("adaptive_asha", "async_halving"):
        time_metric = searcher.get("time_metric")
        max_time = searcher.get("max_time")
        if time_metric is None:
            return required
        required.append(str(time_metric))
        if time_metric in BUILTIN_TIME_METRICS and (time_metric, max_time) != (unit, length):
            name = searcher["name"]
            raise ValueError(
                "HF trainer units does not match configured the max_time configured for "
                f"{name} searcher ({unit}={_number(length)} != {time_metric}={max_time}).  "
                f"Please update one of the searcher.max_time config field or the {flag} "
                "to match the other."
            )
    return required


def check_eval_metrics(
    metrics: Mapping[str, Any], searcher_metric: str | None, time_metric: str | None
) -> None:
    """Refuse a validation report without the metrics the searcher reads from it."""
    search_ok = searcher_metric is None or searcher_metric in metrics
    time_ok = time_metric is None or time_metric in metrics
    if not search_ok and not time_ok:
        raise ValueError(
            f"Searcher metric '{searcher_metric}' set by searcher.metric config field "
            f"and time metric '{time_metric}' from searcher.time_metric config field are "
            "both missing; you must emit those metrics for the hyperparameter search to work."
        )
    if not search_ok:
        raise ValueError(
            f"Searcher metric '{searcher_metric}' set by searcher.metric config field "
            "is missing; you must emit that metric for features like hyperparameter search, "
            "checkpoint garbage collection, and selecting the best checkpoint to work."
        )
    if not time_ok:
        raise ValueError(
            f"Time metric '{time_metric}' set by searcher.time_metric config field is "
            "missing; you must emit that metric for the hyperparameter search to work."
        )


def _number(value: float) -> str:
    """``3`` for 3.0: the Trainer keeps epochs as a float, a config writes an int."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
