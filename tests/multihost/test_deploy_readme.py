"""README's "Deploying on many machines", run block by block on three hosts.

The hosts are network namespaces with hostnames of their own (tests/netns.py) that resolve
each other's names: ``head.example.org`` runs the master, ``gpu1`` and ``gpu2`` an agent
each. They share this machine's filesystem, so each gets its own root for the paths that
are per node; the paths that README says are shared (the installation, as if on NFS, and
the checkpoint directory) have one root for all. That, the copy an admin makes by hand,
and a shell with an admin's environment are the only differences from the README: the
tables below.
"""

from __future__ import annotations

import pathlib
import re
import shutil
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from tests import deploy_readme
from tests.cluster import EXAMPLES, wait_until
from tests.deploy_readme import EVERY_NODE, GPU, HEAD, Block
from tests.netns import Host, Network

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

HEAD_NAME = "head.example.org"
GPU_NAMES = ("gpu1.example.org", "gpu2.example.org")

# README path -> whether every node has its own ("node") or all share one ("shared").
PATHS = {
    "/opt/pydet": "shared",  # installed once: the hosts share this machine's disk
    "/mnt/shared": "shared",  # the checkpoint directory every node mounts
    "/etc/pydet": "node",
    "/var/lib/pydet": "node",
}
# What the admin copies by hand (scp) from the head node to each GPU node.
COPIES = {"/var/lib/pydet/agent-token": "/etc/pydet/", "/etc/pydet/ca.pem": "/etc/pydet/"}
# How long a service may take to say it is ready, and what says so in its log.
READY = {"det-master": "listening on", "det-agent": "connected to the master"}


@dataclass
class Deployment:
    tmp: pathlib.Path
    head: Host
    gpus: tuple[Host, ...]
    workdir: pathlib.Path  # the admin's current directory: the wheel, a clone's examples
    services: list[tuple[str, subprocess.Popen[bytes], pathlib.Path]] = field(default_factory=list)
    outputs: dict[int, str] = field(default_factory=dict)  # README line -> what it printed

    def root(self, host: Host | None, kind: str) -> pathlib.Path:
        name = host.hostname if host is not None and kind == "node" else "shared-fs"
        assert name is not None
        return self.tmp / name

    def table(self, host: Host | None) -> dict[str, str]:
        """The substitutions for a block run on ``host`` (None: this machine)."""
        return {path: f"{self.root(host, kind)}{path}" for path, kind in PATHS.items()}

    def env(self, host: Host | None) -> dict[str, str]:
        home = self.root(host, "node") / "root"
        home.mkdir(parents=True, exist_ok=True)
        return deploy_readme.admin_environment(home)

    def run(self, block: Block, host: Host | None) -> None:
        text = deploy_readme.substitute(block.body, self.table(host))
        if block.file is not None:
            path = pathlib.Path(deploy_readme.substitute(block.file, self.table(host)))
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            return
        argv = ["bash", "-euo", "pipefail", "-c", text]
        if block.service:
            self.start(block, host, text)
            return
        proc = subprocess.run(
            argv if host is None else host.command(argv),
            cwd=self.workdir,
            env=self.env(host),
            capture_output=True,
            text=True,
            timeout=600,
        )
        where = host.hostname if host is not None else "this machine"
        assert proc.returncode == 0, (
            f"{block} on {where} exited {proc.returncode}:\n{text}\n"
            f"stdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-4000:]}\n{self.logs()}"
        )
        self.outputs[block.line] = self.outputs.get(block.line, "") + proc.stdout

    def start(self, block: Block, host: Host | None, text: str) -> None:
        assert host is not None
        program = pathlib.Path(block.commands()[0].split()[0]).name
        assert program in READY, f"{block}: the test does not know when {program} is ready"
        log = self.tmp / f"{program}-{host.hostname}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                host.command(["bash", "-c", f"exec {text}"]),
                cwd=self.workdir,
                env=self.env(host),
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self.services.append((program, proc, log))

        def ready() -> bool:
            assert proc.poll() is None, f"{block} on {host.hostname} exited:\n{self.logs()}"
            return READY[program] in log.read_text(errors="replace")

        try:
            wait_until(ready, 60, f"{program} on {host.hostname} to be ready", interval=0.3)
        except AssertionError as e:
            raise AssertionError(f"{block}: {e}\n{text}\n{self.logs()}") from None

    def copy_to_gpu_nodes(self) -> None:
        for source, target_dir in COPIES.items():
            for gpu in self.gpus:
                src = self.root(self.head, "node") / source.lstrip("/")
                dest = self.root(gpu, "node") / target_dir.lstrip("/")
                dest.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dest)

    def stop(self) -> None:
        for _, proc, _ in reversed(self.services):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for _, proc, _ in self.services:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.services.clear()

    def logs(self) -> str:
        return "\n".join(
            f"==== {log.name}\n{log.read_text(errors='replace')[-4000:]}"
            for _, _, log in self.services
        )


@pytest.fixture
def deployment(tmp_path: pathlib.Path, network: Network) -> Iterator[Deployment]:
    head = network.add_host(HEAD_NAME)
    gpus = tuple(network.add_host(name) for name in GPU_NAMES)
    workdir = tmp_path / "admin"
    deploy_readme.build_wheel(workdir)
    (workdir / "examples").symlink_to(EXAMPLES)
    (tmp_path / "shared-fs" / "mnt" / "shared" / "checkpoints").mkdir(parents=True)
    d = Deployment(tmp_path, head, gpus, workdir)
    try:
        yield d
    finally:
        d.stop()


def test_the_readme_deploys_a_master_and_two_agents_on_three_hosts(
    deployment: Deployment,
) -> None:
    d = deployment
    blocks = deploy_readme.blocks()
    section = deploy_readme.section_text()
    for source, target_dir in COPIES.items():
        assert source in section and target_dir in section, f"README no longer copies {source}"
    copied = False
    for block in blocks:
        if block.docker:
            continue  # tests/docker/test_deploy_readme.py
        if block.where == EVERY_NODE:
            # Once, here: the hosts share the installation, and only here is PyPI reachable.
            d.run(block, None)
        elif block.where == HEAD:
            d.run(block, d.head)
        elif block.where == GPU:
            if not copied:
                d.copy_to_gpu_nodes()
                copied = True
            for gpu in d.gpus:
                d.run(block, gpu)
        else:
            raise AssertionError(f"{block}: nowhere to run it")

    (check,) = [b for b in blocks if not b.docker and "det agent list" in b.body]
    out = d.outputs[check.line]
    # Both agents, by their hostnames, with the addresses of their own hosts, no problems.
    for gpu in d.gpus:
        assert re.search(rf"^\s*{re.escape(str(gpu.hostname))}\s.*\b{gpu.address}\b", out, re.M), (
            out
        )
    assert "agent gpu" not in out, out
    assert re.search(r"Experiment \d+ finished with state COMPLETED", out), out
    # Its checkpoints went to the shared directory of the master's configuration.
    checkpoints = d.tmp / "shared-fs" / "mnt" / "shared" / "checkpoints"
    assert any(checkpoints.iterdir()), "no checkpoint in the shared directory"
    assert "(TLS)" in (d.tmp / f"det-master-{HEAD_NAME}.log").read_text()
