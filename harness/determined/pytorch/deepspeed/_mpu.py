"""``ModelParallelUnit``: which ranks take data and report metrics under model parallelism."""

from __future__ import annotations

import dataclasses
from typing import Any

from determined import core


@dataclasses.dataclass
class ModelParallelUnit:
    """The data-parallel topology of a trial, and each rank's part in it.

    The trainer shards data by ``data_parallel_rank`` among ``data_parallel_world_size``
    replicas, builds data loaders only where ``should_build_data_loader`` and takes metrics
    only from ranks that ``should_report_metrics``. Data parallelism and DeepSpeed's pipeline
    engines get one automatically; for other model parallelism build one and pass it to
    ``context.set_mpu(mpu)``.
    """

    data_parallel_rank: int
    data_parallel_world_size: int
    should_report_metrics: bool
    should_build_data_loader: bool


def make_data_parallel_mpu(dist_context: core.DistributedContext) -> ModelParallelUnit:
    """Plain data parallelism: every rank is a replica that loads data and reports."""
    return ModelParallelUnit(
        data_parallel_rank=dist_context.get_rank(),
        data_parallel_world_size=dist_context.get_size(),
        should_report_metrics=True,
        should_build_data_loader=True,
    )


def make_deepspeed_mpu(topology: Any) -> ModelParallelUnit:
    """The unit of a DeepSpeed ``PipelineParallelGrid`` (a ``PipelineEngine``'s ``mpu``):
    data loaders on the first and last pipeline stages of each model-parallel slice."""
    stage = topology.get_pipe_parallel_rank()
    last_stage = topology.get_pipe_parallel_world_size() - 1
    loads = topology.get_slice_parallel_rank() == 0 and stage in (0, last_stage)
    return ModelParallelUnit(
        data_parallel_rank=topology.get_data_parallel_rank(),
        data_parallel_world_size=topology.get_data_parallel_world_size(),
        should_report_metrics=True,
        should_build_data_loader=loads,
    )
