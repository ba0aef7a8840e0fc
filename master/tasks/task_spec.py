"""What a trial's containers are started with (Determined's task spec): the DET_* launch
environment of every container and the container spec the agent's runtime needs, built
from one request and nothing else."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from determined.api.gen import v1
from determined.common import expconf
from determined.launch import context_cache
from pydet.master.agents.table import Agent
from pydet.master.tasks.allocation import Allocation

_SIZE_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}

# Every container runs the harness's task entry, which fetches the context, runs
# startup-hook.sh and then the entrypoint.
TASK_ENTRY = ["python3", "-m", "determined.exec.launch"]


@dataclass(frozen=True)
class MasterInfo:
    """What the master tells the tasks it starts about itself: its cluster, its address,
    its pools and the config defaults."""

    cluster_id: str
    master_address: str
    pools: tuple[str, ...]
    default_pool: str
    defaults: dict[str, Any]
    # What the configs of commands, notebooks, shells and generic tasks are filled from
    # besides their pool (the master's task_container_defaults).
    task_defaults: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TrialLaunch:
    """One run of a trial, as far as its containers need to know."""

    cluster_id: str
    master_address: str
    experiment_id: int
    trial_id: int
    task_id: str
    seed: int
    hparams: dict[str, Any]
    run_id: int
    steps_completed: int
    latest_checkpoint: str | None
    config: expconf.ExperimentConfig
    context_sha256: str = ""


def shm_bytes(size: int | str | None) -> int:
    """``resources.shm_size`` in bytes (``4G``, ``512M``, or a number); 0 means the default."""
    if size is None:
        return 0
    if isinstance(size, int):
        return size
    text = size.strip().upper().removesuffix("B").removesuffix("I")
    unit = text[-1] if text and text[-1] in _SIZE_UNITS else ""
    number = text[: len(text) - len(unit)]
    return int(float(number) * _SIZE_UNITS[unit])


def start_orders(
    launch: TrialLaunch, alloc: Allocation, agents: Mapping[str, Agent]
) -> list[v1.StartContainer]:
    """One start order per container of ``alloc``, in rank order."""
    cfg = launch.config
    containers = sorted(alloc.containers.values(), key=lambda c: c.rank)
    addrs = [agents[c.agent_id].address for c in containers]
    counts = [len(c.slot_ids) for c in containers]
    orders = []
    for c in containers:
        agent = agents[c.agent_id]
        slots = [agent.slots[s] for s in c.slot_ids if s in agent.slots]
        cuda = any(s.type == "cuda" for s in slots)
        env = {
            "DET_MASTER": launch.master_address,
            "DET_CLUSTER_ID": launch.cluster_id,
            "DET_AGENT_ID": c.agent_id,
            "DET_SLOT_IDS": json.dumps([int(s) if s.isdigit() else s for s in c.slot_ids]),
            "DET_TASK_ID": launch.task_id,
            "DET_ALLOCATION_ID": alloc.id,
            "DET_SESSION_TOKEN": alloc.token,
            "DET_TASK_TYPE": "TRIAL",
            "DET_TRIAL_ID": str(launch.trial_id),
            "DET_EXPERIMENT_ID": str(launch.experiment_id),
            "DET_TRIAL_SEED": str(launch.seed),
            "DET_HPARAMS": json.dumps(launch.hparams),
            "DET_EXPERIMENT_CONFIG": cfg.json_text,
            "DET_STEPS_COMPLETED": str(launch.steps_completed),
            "DET_TRIAL_RUN_ID": str(launch.run_id),
            "DET_CONTAINER_ADDRS": json.dumps(addrs),
            "DET_CONTAINER_RANK": str(c.rank),
            "DET_RESOURCES_ID": c.id,
            "DET_CONTAINER_SLOT_COUNTS": json.dumps(counts),
            "DET_GPU_UUIDS": json.dumps([s.uuid for s in slots if s.type == "cuda"]),
        }
        if launch.latest_checkpoint:
            env["DET_LATEST_CHECKPOINT"] = launch.latest_checkpoint
        if launch.context_sha256:
            env[context_cache.SHA256_ENV] = launch.context_sha256
        env.update(variables(cfg.environment, cuda=cuda))
        orders.append(
            v1.StartContainer(
                container_id=c.id,
                allocation_id=alloc.id,
                task_id=launch.task_id,
                argv=list(TASK_ENTRY),
                env=env,
                slot_ids=list(c.slot_ids),
                spec=spec_of(cfg, alloc, c.id, launch.task_id, cuda=cuda),
            )
        )
    return orders


def variables(environment: expconf.EnvironmentConfig, *, cuda: bool) -> dict[str, str]:
    """A config's ``environment_variables`` for a container with (or without) GPUs."""
    chosen = environment.environment_variables
    out = {}
    for item in chosen.cuda if cuda else chosen.cpu:
        key, _, value = item.partition("=")
        out[key] = value
    return out


def labels(alloc: Allocation, container_id: str, task_id: str) -> dict[str, str]:
    """The labels a docker container carries to say whose it is."""
    return {
        "ai.pydet.allocation": alloc.id,
        "ai.pydet.container": container_id,
        "ai.pydet.task": task_id,
    }


class Containerized(Protocol):
    """A config a container runs under (a trial's, a command's)."""

    @property
    def environment(self) -> expconf.EnvironmentConfig: ...
    @property
    def bind_mounts(self) -> Sequence[expconf.BindMount]: ...
    @property
    def resources(self) -> expconf.ResourcesConfig: ...


def spec_of(
    cfg: Containerized, alloc: Allocation, container_id: str, task_id: str, *, cuda: bool
) -> v1.ContainerSpec:
    """``container_spec`` of a config, for one container of an allocation."""
    return container_spec(
        cfg.environment,
        cfg.bind_mounts,
        cfg.resources,
        labels=labels(alloc, container_id, task_id),
        cuda=cuda,
    )


def container_spec(
    environment: expconf.EnvironmentConfig,
    bind_mounts: Sequence[expconf.BindMount],
    resources: expconf.ResourcesConfig,
    *,
    labels: dict[str, str],
    cuda: bool,
) -> v1.ContainerSpec:
    """What the docker runtime needs from a config's environment, bind mounts and resources
    (a trial's, or a command's)."""
    image = environment.image
    auth = environment.registry_auth
    return v1.ContainerSpec(
        image=(image.cuda if cuda else image.cpu) or "",
        force_pull=environment.force_pull_image,
        bind_mounts=[
            v1.BindMount(
                host_path=m.host_path,
                container_path=m.container_path,
                read_only=m.read_only,
                propagation=m.propagation,
            )
            for m in bind_mounts
        ],
        shm_size=shm_bytes(resources.shm_size),
        registry_auth=json.dumps(auth.to_dict()) if auth is not None else "",
        devices=[
            v1.DeviceMount(host_path=d.host_path, container_path=d.container_path, mode=d.mode)
            for d in resources.devices
        ],
        add_capabilities=list(environment.add_capabilities),
        drop_capabilities=list(environment.drop_capabilities),
        labels=labels,
    )
