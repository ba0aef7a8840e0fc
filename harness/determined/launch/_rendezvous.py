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


# Linux's ioctl that reads an interface's IPv4 address (struct ifreq: name, then sockaddr_in).
_SIOCGIFADDR = 0x8915


def interface_of(address: str) -> str | None:
    """The network interface that holds ``address`` on this host (IPv4, Linux), if any."""
    import fcntl
    import struct

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _, name in socket.if_nameindex():
            request = struct.pack("256s", name.encode()[:15])
            try:
                answer = fcntl.ioctl(s.fileno(), _SIOCGIFADDR, request)
            except OSError:
                continue  # no IPv4 address on it
            if socket.inet_ntoa(answer[20:24]) == address:
                return name
    return None


def interface_env(info: ClusterInfo, environ: dict[str, str]) -> dict[str, str]:
    """Tell gloo and NCCL which interface holds this container's own address.

    Left alone, they pick the address the host name resolves to, which on a node with
    several networks (or in a network namespace) may be one the other nodes cannot reach,
    or loopback. A user's own ``GLOO_SOCKET_IFNAME`` / ``NCCL_SOCKET_IFNAME`` wins.
    """
    if len(info.container_addrs) < 2:
        return {}
    own = info.container_addrs[info.container_rank]
    try:
        name = interface_of(own)
    except OSError:
        name = None
    if name is None or name == "lo":
        return {}
    wanted = ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME")
    return {key: name for key in wanted if key not in environ}
