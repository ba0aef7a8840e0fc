"""Several hosts on one machine: a Linux network namespace per host, joined by a bridge.

Each network is a /24 of 198.18.0.0/15 (the range reserved for network tests); a host takes
the lowest free address there, or the one it is given (tests/cloud.py gives hosts the
private addresses of cloud instances). The bridge, in the root namespace, holds ``.254`` so
that tests, the CLI and a browser reach every host from outside. A host may also have a
name: it is then its hostname (a UTS namespace of its own for every command) and every host
resolves it, through the ``/etc/netns/<namespace>/hosts`` that ``ip netns exec`` puts over
``/etc/hosts``. ``remove_host`` takes one host away (its processes must be gone first);
``close`` removes everything still there. Hosts may come and go from several threads.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import pathlib
import shlex
import subprocess
import threading
from dataclasses import dataclass

# Where ``ip netns exec NAME`` finds files to bind over their namesakes in /etc.
NETNS_ETC = pathlib.Path("/etc/netns")


class Refused(Exception):
    """The kernel or our privileges do not allow namespaces here."""


def _ip(*args: str) -> None:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if proc.returncode != 0:
        raise Refused(f"ip {' '.join(args)}: {proc.stderr.strip()}")


@dataclass(frozen=True)
class Host:
    name: str  # the namespace
    address: str
    link: str  # the root-namespace end of the host's cable
    hostname: str | None = None  # its own hostname, which every host resolves

    def command(self, argv: list[str]) -> list[str]:
        """``argv`` run on this host."""
        prefix = ["ip", "netns", "exec", self.name]
        if self.hostname is not None:
            named = f'hostname {shlex.quote(self.hostname)} && exec "$@"'
            prefix += ["unshare", "--uts", "sh", "-c", named, "sh"]
        return [*prefix, *argv]

    def unplug(self) -> None:
        _ip("link", "set", self.link, "down")

    def plug(self) -> None:
        _ip("link", "set", self.link, "up")


class Network:
    def __init__(self) -> None:
        tag = os.getpid() % 100_000
        # One /24 per test process: 198.18.<n>.0 with n in 1..250.
        self.subnet = f"198.18.{tag % 250 + 1}"
        self.gateway = f"{self.subnet}.254"
        self._tag = tag
        self._bridge = f"pdbr{tag}"
        self.hosts: list[Host] = []
        self._added = 0  # hosts ever added: the next one's number in its interface names
        self._lock = threading.RLock()
        _ip("link", "add", self._bridge, "type", "bridge")
        try:
            _ip("addr", "add", f"{self.gateway}/24", "dev", self._bridge)
            _ip("link", "set", self._bridge, "up")
        except Refused:
            self.close()
            raise

    def add_host(self, hostname: str | None = None, address: str | None = None) -> Host:
        """A new host: with ``address`` (in this network's /24) or the lowest free one."""
        with self._lock:
            address = self._address(address)
            self._added += 1
            n = self._added
            host = Host(f"pydet{self._tag}h{n}", address, f"pd{self._tag}h{n}", hostname)
            inner = f"pd{self._tag}i{n}"
            self.hosts.append(host)
            _ip("netns", "add", host.name)
            _ip("link", "add", host.link, "type", "veth", "peer", "name", inner)
            _ip("link", "set", inner, "netns", host.name)
            _ip("link", "set", host.link, "master", self._bridge)
            _ip("link", "set", host.link, "up")
            on_host = ("netns", "exec", host.name, "ip")
            _ip(*on_host, "addr", "add", f"{host.address}/24", "dev", inner)
            _ip(*on_host, "link", "set", inner, "up")
            _ip(*on_host, "link", "set", "lo", "up")
            _ip(*on_host, "route", "add", "default", "via", self.gateway)
            self._write_hosts_files()
            return host

    def _address(self, wanted: str | None) -> str:
        taken = {h.address for h in self.hosts} | {self.gateway}
        if wanted is None:
            for n in range(1, 254):
                if f"{self.subnet}.{n}" not in taken:
                    return f"{self.subnet}.{n}"
            raise ValueError(f"no free address left in {self.subnet}.0/24")
        net = ipaddress.ip_network(f"{self.subnet}.0/24")
        ip = ipaddress.ip_address(wanted)
        if ip not in net or ip in (net.network_address, net.broadcast_address):
            raise ValueError(f"{wanted} is no host address of this network, {net}")
        if wanted in taken:
            raise ValueError(f"{wanted} is taken already")
        return wanted

    def remove_host(self, host: Host) -> None:
        """Takes ``host`` away: its namespace, cable and hosts file."""
        with self._lock:
            etc = NETNS_ETC / host.name
            with contextlib.suppress(OSError):
                (etc / "hosts").unlink(missing_ok=True)
                etc.rmdir()
            for args in (("netns", "del", host.name), ("link", "del", host.link)):
                try:
                    _ip(*args)
                except Refused:
                    pass  # already gone with its namespace
            if host in self.hosts:
                self.hosts.remove(host)
                self._write_hosts_files()

    def _write_hosts_files(self) -> None:
        """Every host's /etc/hosts: loopback and the named hosts of this network."""
        lines = ["127.0.0.1 localhost", "::1 localhost ip6-localhost ip6-loopback"]
        for host in self.hosts:
            if host.hostname is not None:
                short = host.hostname.split(".", 1)[0]
                lines.append(f"{host.address} {host.hostname} {short}")
        for host in self.hosts:
            etc = NETNS_ETC / host.name
            etc.mkdir(parents=True, exist_ok=True)
            (etc / "hosts").write_text("\n".join(lines) + "\n")

    def close(self) -> None:
        with self._lock:
            for host in list(self.hosts):
                self.remove_host(host)
            with contextlib.suppress(OSError):
                NETNS_ETC.rmdir()  # when no other network uses it
            try:
                _ip("link", "del", self._bridge)
            except Refused:
                pass
