"""``profiling`` and ``optimizations``: settings Determined's harness reads, kept with defaults.

pydet's harness does not profile or fuse tensors, but code written for Determined reads these
from the experiment config, so they are checked and filled in the way Determined fills them.
"""

from __future__ import annotations

from typing import Any

from determined.common.expconf._reader import Section

PROFILING_DEFAULTS: dict[str, Any] = {
    "enabled": False,
    "begin_on_batch": 0,
    "end_after_batch": None,
    "sync_timings": True,
}
OPTIMIZATIONS_DEFAULTS: dict[str, Any] = {
    "aggregation_frequency": 1,
    "average_aggregated_gradients": True,
    "average_training_metrics": False,
    "gradient_compression": False,
    "grad_updates_size_file": None,
    "mixed_precision": "O0",
    "tensor_fusion_threshold": 64,
    "tensor_fusion_cycle_time": 5,
    "auto_tune_tensor_fusion": False,
}


def parse_profiling(sec: Section) -> dict[str, Any]:
    d = PROFILING_DEFAULTS
    enabled = sec.boolean("enabled", d["enabled"])
    begin = sec.integer("begin_on_batch", d["begin_on_batch"], minimum=0)
    end = sec.integer("end_after_batch", d["end_after_batch"], minimum=0)
    sync_timings = sec.boolean("sync_timings", d["sync_timings"])
    sec.finish()
    if end is not None and begin > end:
        sec.problems.add(
            sec.at("end_after_batch"), f"must not be less than begin_on_batch ({begin})"
        )
    return {
        "enabled": enabled,
        "begin_on_batch": begin,
        "end_after_batch": end,
        "sync_timings": sync_timings,
    }


def parse_optimizations(sec: Section) -> dict[str, Any]:
    d = OPTIMIZATIONS_DEFAULTS
    config = {
        "aggregation_frequency": sec.integer(
            "aggregation_frequency", d["aggregation_frequency"], minimum=1
        ),
        "tensor_fusion_threshold": sec.integer(
            "tensor_fusion_threshold", d["tensor_fusion_threshold"], minimum=0
        ),
        "tensor_fusion_cycle_time": sec.integer(
            "tensor_fusion_cycle_time", d["tensor_fusion_cycle_time"], minimum=0
        ),
        "grad_updates_size_file": sec.string("grad_updates_size_file", None),
        "mixed_precision": sec.string("mixed_precision", d["mixed_precision"], non_empty=True),
    }
    for flag in (
        "average_aggregated_gradients",
        "average_training_metrics",
        "gradient_compression",
        "auto_tune_tensor_fusion",
    ):
        config[flag] = sec.boolean(flag, d[flag])
    sec.finish()
    return config
