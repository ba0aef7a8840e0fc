"""The chief container's address and a free port on it, known to every container.

The chief (container rank 0) picks a free TCP port; with more than one container it hands
the port to the others through the master's all-gather, so no fixed port can collide with
another task on the same machine.
"""

from __future__ import annotations

import json
import socket

from determined import ClusterInfo

GROUP = "launcher"


def free_port() -> int:
    """A TCP port that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        port: int = s.getsockname()[1]
        return port


def chief_addr(info: ClusterInfo) -> str:
    return info.container_addrs[0]


def chief_port(info: ClusterInfo) -> int:
    """A free port on the chief container, the same on every container.

    Raises:
        determined.common.errors.DetError: the all-gather through the master failed.
    """
    port = free_port() if info.container_rank == 0 else 0
    if len(info.container_addrs) == 1:
        return port
    # Imported here: the gRPC stack costs a second of start-up that one container never needs.
    from determined.launch import rpc

    payload = json.dumps({"port": port}).encode()
    gathered = rpc.all_gather(info, payload, group=GROUP, seq=0)
    chief: int = json.loads(gathered[0])["port"]
    return chief


def nodes(info: ClusterInfo) -> list[tuple[str, int]]:
    """``(address, slots)`` per container, with at least one slot for a CPU-only task."""
    counts = list(info.container_slot_counts)
    if len(counts) != len(info.container_addrs):
        counts = [len(info.slot_ids)] * len(info.container_addrs)
    return [(addr, max(1, n)) for addr, n in zip(info.container_addrs, counts, strict=True)]
