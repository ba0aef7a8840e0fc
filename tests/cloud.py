"""A cloud for tests: instances that a fake provider launches become real hosts.

moto's EC2 (tests/ec2server.py) and the command cloud (tests/cloud_commands/) only keep
books. A ``Cloud`` here watches those books from a background thread and does what the
provider would: for each instance that comes up it boots a host, a network namespace of a
tests/netns.py ``Network``, and runs the instance's user data there as ``bash -s`` (the
script on stdin) in a process group of its own, with the environment the test gives, its
output appended to ``<log_dir>/<instance id>.log``. When the instance goes (the master
ended it, or a test did behind the master's back, as a spot interruption would), the host
vanishes: every process in its namespace is killed (SIGKILL) and the namespace removed.

Each host is named after its instance: its hostname is the instance id, which is also the
script's ``$PYDET_INSTANCE_ID`` (what a real machine would ask its metadata service), so a
``det-agent`` started there registers as the instance id unless told otherwise.

``Cloud`` boots moto's ``running`` instances at their private addresses, which must lie
in 198.18.0.0/15 (the test's subnet from ``EC2Server.subnet``; anything else, such as
moto's default VPC, is refused: ``check`` raises). ``CommandCloud`` boots the command
cloud's ``starting`` instances at the network's next free address, then marks them
``running``; ``stopping`` ones it kills and marks ``terminated``.

Use as a context manager (or call ``close``, which kills and removes everything, in a
``finally``); ``hosts()`` and ``wait_for`` see what is booted.
"""

from __future__ import annotations

import base64
import contextlib
import ipaddress
import os
import pathlib
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Self, TypeVar

from tests.cloud_commands.state import Store
from tests.netns import Host, Network

# The only range hosts may have (RFC 2544's, for network tests).
TEST_RANGE = ipaddress.ip_network("198.18.0.0/15")
COMMANDS = pathlib.Path(__file__).resolve().parent / "cloud_commands"
T = TypeVar("T")


class CloudError(RuntimeError):
    """The cloud could not do what an instance needed (the first such failure)."""


@dataclass(frozen=True)
class HostInfo:
    instance_id: str
    address: str
    namespace: str
    log: pathlib.Path
    pid: int  # of the user data's bash; its process group has the same id
    up: bool  # the host exists: booted, not yet vanished
    alive: bool  # the user data's script still runs
    returncode: int | None  # how it ended, once it has


def default_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """An environment for user data: this Python's bin (``det-agent``) first on PATH."""
    path = os.pathsep.join([os.path.dirname(sys.executable), "/usr/local/bin", "/usr/bin", "/bin"])
    env = {"PATH": path, "HOME": os.environ.get("HOME", "/root"), "LANG": "C.UTF-8"}
    return {**env, **(extra or {})}


@dataclass
class _Booted:
    host: Host
    proc: subprocess.Popen[bytes]
    log: pathlib.Path
    up: bool = True


class _Cloud:
    """Boots and kills hosts as the books say; subclasses read the books."""

    # States in which an instance is to be booted, and those in which its machine exists.
    BOOT: frozenset[str]
    UP: frozenset[str]

    def __init__(
        self,
        network: Network,
        log_dir: pathlib.Path,
        env: Mapping[str, str] | None = None,
        poll: float = 0.15,
        lifetime: float = 3600,
    ) -> None:
        self.network = network
        self.log_dir = log_dir
        self.host_env = dict(env) if env is not None else default_env()
        self.poll = poll
        self.lifetime = lifetime
        self._booted: dict[str, _Booted] = {}
        self._failed: set[str] = set()
        self._errors: list[str] = []
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="cloud", daemon=True)
        log_dir.mkdir(parents=True, exist_ok=True)

    # What a provider's books say, subclasses' part.

    def _states(self) -> dict[str, tuple[str, str | None]]:
        """Every instance: its state and, where the books have one, its address."""
        raise NotImplementedError

    def _user_data(self, instance_id: str) -> bytes:
        raise NotImplementedError

    def _did_boot(self, instance_id: str, address: str) -> None:
        """The host is booted (the command cloud marks the instance running)."""

    def _did_end(self, instance_id: str, state: str) -> None:
        """The instance, in ``state``, has no host any more."""

    def interrupt(self, instance_id: str) -> None:
        """Ends the instance behind the master's back (a spot interruption, say)."""
        raise NotImplementedError

    # The machinery.

    def start(self) -> Self:
        self._thread.start()
        return self

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _watch(self) -> None:
        deadline = time.monotonic() + self.lifetime
        rounds = int(self.lifetime / self.poll) + 1
        for _ in range(rounds):
            if self._stop.is_set() or time.monotonic() > deadline:
                return
            try:
                self.sync()
            except Exception as e:  # the books are unreadable: say so, keep watching
                self._error(f"reading the instances: {e!r}")
            self._stop.wait(self.poll)

    def _error(self, message: str) -> None:
        with self._lock:
            if len(self._errors) < 100:
                self._errors.append(message)

    def sync(self) -> None:
        """One look at the books: hosts vanish, then new ones boot."""
        states = self._states()
        with self._lock:
            if self._stop.is_set():
                return
            for instance_id, booted in self._booted.items():
                state = states.get(instance_id, ("gone", None))[0]
                if booted.up and state not in self.UP:
                    self._vanish(booted)
            for instance_id, (state, _) in states.items():
                if state not in self.UP:
                    self._did_end(instance_id, state)
            for instance_id, (state, address) in states.items():
                new = instance_id not in self._booted and instance_id not in self._failed
                if state in self.BOOT and new:
                    try:
                        self._boot(instance_id, address)
                    except Exception as e:
                        self._failed.add(instance_id)
                        self._error(f"booting {instance_id}: {e}")

    def _boot(self, instance_id: str, address: str | None) -> None:
        if address is not None and ipaddress.ip_address(address) not in TEST_RANGE:
            raise CloudError(f"its address {address} is outside {TEST_RANGE}: refused")
        user_data = self._user_data(instance_id)
        script = self.log_dir / f"{instance_id}.userdata"
        script.write_bytes(user_data)
        log = self.log_dir / f"{instance_id}.log"
        host = self.network.add_host(hostname=instance_id, address=address)
        try:
            with script.open("rb") as stdin, log.open("ab") as out:
                proc = subprocess.Popen(
                    host.command(["bash", "-s"]),
                    stdin=stdin,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env={**self.host_env, "PYDET_INSTANCE_ID": instance_id},
                    cwd="/",
                    start_new_session=True,
                )
        except BaseException:
            self.network.remove_host(host)
            raise
        self._booted[instance_id] = _Booted(host, proc, log)
        self._did_boot(instance_id, host.address)

    def _vanish(self, booted: _Booted) -> None:
        """The machine is gone: every process on it killed, its namespace removed."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(booted.proc.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        for _ in range(200):  # what left the process group (daemons) dies with the host
            pids = _pids_in(booted.host.name)
            if not pids or time.monotonic() > deadline:
                break
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.01)
        try:
            booted.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._error(f"{booted.host.name}: pid {booted.proc.pid} outlived SIGKILL")
        self.network.remove_host(booted.host)
        booted.up = False

    def hosts(self) -> dict[str, HostInfo]:
        """Every instance booted so far, by id (vanished ones too, ``up`` false)."""
        self.check()
        with self._lock:
            return {
                instance_id: HostInfo(
                    instance_id=instance_id,
                    address=b.host.address,
                    namespace=b.host.name,
                    log=b.log,
                    pid=b.proc.pid,
                    up=b.up,
                    alive=b.proc.poll() is None,
                    returncode=b.proc.returncode,
                )
                for instance_id, b in self._booted.items()
            }

    def check(self) -> None:
        """Raises ``CloudError`` if anything failed: an instance not booted, unreadable books."""
        with self._lock:
            if self._errors:
                raise CloudError("; ".join(self._errors))
        if not self._thread.is_alive() and self._thread.ident is not None:
            if not self._stop.is_set():
                raise CloudError("the cloud's watcher has stopped (its lifetime is over)")

    def wait_for(
        self,
        predicate: Callable[[dict[str, HostInfo]], T],
        timeout: float,
        what: str = "the cloud's hosts",
    ) -> T:
        """``predicate(hosts())`` once it is true (within ``timeout`` seconds), else raises."""
        deadline = time.monotonic() + timeout
        for _ in range(int(timeout / 0.05) + 2):
            result = predicate(self.hosts())
            if result:
                return result
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)
        raise TimeoutError(f"{what}: not within {timeout} s\n{self.describe()}")

    def describe(self) -> str:
        """Every host and its log's tail, for failure messages."""
        lines = []
        for info in self.hosts().values():
            lines.append(f"{info}")
            with contextlib.suppress(OSError):
                lines += ["    " + line for line in info.log.read_text().splitlines()[-20:]]
        return "\n".join(lines) or "(no hosts booted)"

    def close(self) -> None:
        """Stops watching; every host vanishes."""
        self._stop.set()
        if self._thread.ident is not None:
            self._thread.join(timeout=30)
        with self._lock:
            for booted in self._booted.values():
                if booted.up:
                    try:
                        self._vanish(booted)
                    except Exception as e:
                        self._error(f"removing {booted.host.name}: {e}")


def _pids_in(namespace: str) -> list[int]:
    proc = subprocess.run(
        ["ip", "netns", "pids", namespace], capture_output=True, text=True, timeout=30
    )
    return [int(p) for p in proc.stdout.split() if p.isdigit()]


class Cloud(_Cloud):
    """The hosts of moto's EC2 instances (``client``: boto3's EC2 client for the server)."""

    BOOT = frozenset({"running"})
    UP = frozenset({"pending", "running"})

    def __init__(
        self,
        client: Any,
        network: Network,
        log_dir: pathlib.Path,
        *,
        subnet_id: str | None = None,
        **options: Any,
    ) -> None:
        """``subnet_id``: boot only the instances in that subnet (a server that other tests
        share holds theirs too)."""
        super().__init__(network, log_dir, **options)  # env, poll, lifetime
        self.client = client
        self.filters = [{"Name": "subnet-id", "Values": [subnet_id]}] if subnet_id else []

    def _states(self) -> dict[str, tuple[str, str | None]]:
        out: dict[str, tuple[str, str | None]] = {}
        pages = self.client.get_paginator("describe_instances").paginate(Filters=self.filters)
        for page in pages:
            for reservation in page["Reservations"]:
                for i in reservation["Instances"]:
                    out[i["InstanceId"]] = (i["State"]["Name"], i.get("PrivateIpAddress"))
        return out

    def _user_data(self, instance_id: str) -> bytes:
        reply = self.client.describe_instance_attribute(
            InstanceId=instance_id, Attribute="userData"
        )
        return base64.b64decode(reply.get("UserData", {}).get("Value", ""))

    def _boot(self, instance_id: str, address: str | None) -> None:
        if address is None:
            raise CloudError("moto gave it no private address")
        super()._boot(instance_id, address)

    def interrupt(self, instance_id: str) -> None:
        self.client.terminate_instances(InstanceIds=[instance_id])


class CommandCloud(_Cloud):
    """The hosts of the command cloud's instances, whose books are in ``state_dir``.

    The master runs tests/cloud_commands/{launch,terminate,list} with
    ``PYDET_TEST_CLOUD_DIR`` set to ``state_dir`` (``env()``, ``command(name)``).
    """

    BOOT = frozenset({"starting"})
    UP = frozenset({"starting", "running"})

    def __init__(
        self, state_dir: pathlib.Path, network: Network, log_dir: pathlib.Path, **options: Any
    ) -> None:
        super().__init__(network, log_dir, **options)  # env, poll, lifetime
        self.store = Store(state_dir)

    @staticmethod
    def command(name: str) -> pathlib.Path:
        """The path of the ``launch``, ``terminate`` or ``list`` script."""
        return COMMANDS / name

    def env(self) -> dict[str, str]:
        """What a process running the scripts needs."""
        return {"PYDET_TEST_CLOUD_DIR": str(self.store.root)}

    def refuse_launches(self, message: str | None) -> None:
        """``launch`` fails with ``message`` from now on (no capacity); None: it works again."""
        fails = self.store.root / "launch.fail"
        if message is None:
            fails.unlink(missing_ok=True)
        else:
            fails.write_text(message + "\n")

    def _states(self) -> dict[str, tuple[str, str | None]]:
        return {r["id"]: (r["state"], None) for r in self.store.records()}

    def _user_data(self, instance_id: str) -> bytes:
        return self.store.user_data(instance_id)

    def _did_boot(self, instance_id: str, address: str) -> None:
        self.store.move(instance_id, "starting", "running", address=address)

    def _did_end(self, instance_id: str, state: str) -> None:
        if state == "stopping":
            self.store.move(instance_id, "stopping", "terminated")

    def interrupt(self, instance_id: str) -> None:
        self.store.terminate([instance_id])
