"""The Docker Engine API body for one task container, from a start order.

Pure functions, so that what a container gets (environment, mounts, GPUs, labels, network)
can be checked without an engine. Every container uses the host's network: rendezvous
addresses and the master are the host's, and pydet never creates bridge networks.
"""

from __future__ import annotations

import base64
import json
import logging
import posixpath
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydet.agent.docker_harness import PYLIB, HostPath
from pydet.agent.runtime import StartOrder
from pydet.agent.slots import SlotSpec

log = logging.getLogger(__name__)

# The task's working directory inside the container: the harness unpacks the context here.
# It is the host directory <work_dir>/<container_id>, bind-mounted, so it starts empty.
WORKDIR = "/run/determined/workdir"

AGENT_LABEL = "ai.pydet.agent"
CONTAINER_LABEL = "ai.pydet.container"
ALLOCATION_LABEL = "ai.pydet.allocation"
WORKDIR_LABEL = "ai.pydet.workdir"

_NAME_BAD = re.compile(r"[^A-Za-z0-9_.-]")


def container_name(agent_id: str, container_id: str) -> str:
    """A name `docker ps` shows; unique per agent and container, valid for the engine."""
    return _NAME_BAD.sub("_", f"pydet-{agent_id}-{container_id}")


def environment(
    order: StartOrder, *, master: str, agent_id: str, pythonpath: str | None
) -> list[str]:
    """The order's variables plus what the process runtime also sets; nothing from the
    agent's own environment leaks in (the image supplies PATH, HOME, ...)."""
    env = dict(order.env)
    env["DET_MASTER"] = master
    env["DET_AGENT_ID"] = agent_id
    env["PYTHONUNBUFFERED"] = "1"
    if pythonpath:
        rest = env.get("PYTHONPATH", "")
        env["PYTHONPATH"] = f"{pythonpath}:{rest}" if rest else pythonpath
    return [f"{k}={v}" for k, v in env.items()]


def shared_fs_path(env: Mapping[str, str]) -> str | None:
    """The ``shared_fs`` checkpoint directory of the task's experiment config, if any.

    The harness writes checkpoints to ``host_path`` itself, so the container must see that
    directory at the same path, as every task on the process runtime does.
    """
    raw = env.get("DET_EXPERIMENT_CONFIG")
    if not raw:
        return None
    try:
        storage = json.loads(raw).get("checkpoint_storage")
    except (ValueError, AttributeError):
        return None
    if not isinstance(storage, dict) or storage.get("type") != "shared_fs":
        return None
    path = storage.get("host_path")
    return path if isinstance(path, str) and posixpath.isabs(path) else None


def _bind(source: str, target: str, *, read_only: bool, propagation: str = "") -> dict[str, Any]:
    mount: dict[str, Any] = {"Type": "bind", "Source": source, "Target": target}
    if read_only:
        mount["ReadOnly"] = True
    if propagation:
        mount["BindOptions"] = {"Propagation": propagation}
    return mount


def mounts(
    order: StartOrder,
    *,
    workdir: Path,
    harness: Sequence[HostPath],
    storage: str | None,
) -> list[dict[str, Any]]:
    """Bind mounts: the work dir, the harness (mount mode), checkpoints, the config's own."""
    out = [_bind(str(workdir), WORKDIR, read_only=False)]
    out += [_bind(p.host_path, f"{PYLIB}/{p.name}", read_only=True) for p in harness]
    targets = {m["Target"] for m in out}
    for m in order.spec.bind_mounts:
        target = m.container_path
        if not posixpath.isabs(target):
            target = posixpath.join(WORKDIR, target)
        out.append(_bind(m.host_path, target, read_only=m.read_only, propagation=m.propagation))
        targets.add(target)
    if storage and storage not in targets:
        out.append(_bind(storage, storage, read_only=False))
    return out


def device_requests(order: StartOrder, slots: Mapping[str, SlotSpec]) -> list[dict[str, Any]]:
    """The allocated GPUs, by UUID where known, for the NVIDIA container runtime; none for
    artificial CPU slots. Inside, the GPUs are numbered from 0 as CUDA expects."""
    gpus = [slots[s] for s in order.slot_ids if s in slots and slots[s].type == "cuda"]
    if not gpus:
        return []
    return [
        {
            "Driver": "nvidia",
            "DeviceIDs": [g.uuid or g.id for g in gpus],
            "Capabilities": [["gpu"]],
        }
    ]


def labels(order: StartOrder, *, agent_id: str, workdir: Path) -> dict[str, str]:
    """The spec's labels plus what ties the container to this agent and allocation: what the
    agent looks for when it restarts."""
    return {
        **order.spec.labels,
        AGENT_LABEL: agent_id,
        CONTAINER_LABEL: order.container_id,
        ALLOCATION_LABEL: order.allocation_id,
        WORKDIR_LABEL: str(workdir),
    }


def create_body(
    order: StartOrder,
    *,
    image: str,
    agent_id: str,
    master: str,
    workdir: Path,
    slots: Mapping[str, SlotSpec],
    harness: Sequence[HostPath],
    storage: str | None,
    init: bool = True,
) -> dict[str, Any]:
    """The body of ``POST /containers/create`` for ``order``."""
    spec = order.spec
    host_config: dict[str, Any] = {
        "NetworkMode": "host",
        "Mounts": mounts(order, workdir=workdir, harness=harness, storage=storage),
        # A tiny init as PID 1 passes SIGTERM on to the command and reaps its orphans; a
        # command that is PID 1 itself ignores SIGTERM unless it installed a handler.
        "Init": init,
    }
    if spec.shm_size > 0:
        host_config["ShmSize"] = spec.shm_size
    if spec.add_capabilities:
        host_config["CapAdd"] = list(spec.add_capabilities)
    if spec.drop_capabilities:
        host_config["CapDrop"] = list(spec.drop_capabilities)
    if spec.devices:
        host_config["Devices"] = [
            {
                "PathOnHost": d.host_path,
                "PathInContainer": d.container_path,
                "CgroupPermissions": d.mode or "rwm",
            }
            for d in spec.devices
        ]
    requests = device_requests(order, slots)
    if requests:
        host_config["DeviceRequests"] = requests
    return {
        "Image": image,
        # The command replaces the image's entrypoint too: every image starts the same way.
        "Entrypoint": [order.argv[0]],
        "Cmd": list(order.argv[1:]),
        "Env": environment(
            order, master=master, agent_id=agent_id, pythonpath=PYLIB if harness else None
        ),
        "WorkingDir": WORKDIR,
        # Its owner's agent user and group (as Determined runs a task's container).
        **({"User": f"{order.run_as.uid}:{order.run_as.gid}"} if order.run_as else {}),
        "Labels": labels(order, agent_id=agent_id, workdir=workdir),
        "AttachStdin": False,
        "AttachStdout": False,
        "AttachStderr": False,
        "Tty": False,
        "OpenStdin": False,
        "HostConfig": host_config,
    }


def registry_auth_header(registry_auth: str) -> str | None:
    """``X-Registry-Auth`` for a pull, from the config's ``registry_auth`` as JSON.

    Raises:
        ValueError: the JSON is not an object.
    """
    if not registry_auth:
        return None
    data = json.loads(registry_auth)
    if not isinstance(data, dict):
        raise ValueError("registry_auth must be a mapping (username, password, serveraddress)")
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode()


def split_image(image: str) -> tuple[str, str]:
    """``(name, tag)`` for a pull; the tag is ``latest`` unless the name has one or a digest."""
    if "@" in image:
        return image, ""
    name, sep, tag = image.rpartition(":")
    if sep and "/" not in tag:
        return name, tag
    return image, "latest"
