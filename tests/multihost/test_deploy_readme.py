"""README's "Deploying on many machines", run block by block on three hosts.

The hosts are network namespaces with hostnames of their own (tests/netns.py) that resolve
each other's names: ``head.example.org`` runs the master, ``gpu1`` and ``gpu2`` an agent
each. They share this machine's filesystem, so each gets its own root for the paths that
are per node; the paths that README says are shared (the installation, as if on NFS, and
the checkpoint directory) have one root for all. That, the copy an admin makes by hand,
and a shell with an admin's environment are the only differences from the README: the
tables ``PATHS`` and ``COPIES`` and ``admin_environment`` in tests/deploy_readme.py.
Installing runs once, in the root namespace: the hosts share the installation, and PyPI is
reachable only from there.
"""

from __future__ import annotations

import pathlib
import re
from collections.abc import Iterator

import pytest

from tests import deploy_readme
from tests.deploy_readme import COPIES, EVERY_NODE, GPU, HEAD, Runbook
from tests.netns import Network

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

# The hosts' names, which every host resolves (tests/netns.py): no substitution needed.
HEAD_NAME = "head.example.org"
GPU_NAMES = ("gpu1.example.org", "gpu2.example.org")


@pytest.fixture
def runbook(tmp_path: pathlib.Path, network: Network) -> Iterator[Runbook]:
    head = network.add_host(HEAD_NAME)
    gpus = tuple(network.add_host(name) for name in GPU_NAMES)
    book = Runbook(tmp_path, head, gpus)
    try:
        book.prepare()
        yield book
    finally:
        book.close()


def test_the_readme_deploys_a_master_and_two_agents_on_three_hosts(runbook: Runbook) -> None:
    book = runbook
    assert book.head is not None
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
            book.run(block, None)
        elif block.where == HEAD:
            book.run(block, book.head)
        elif block.where == GPU:
            if not copied:
                book.copy_to_gpu_nodes()
                copied = True
            for gpu in book.gpus:
                book.run(block, gpu)
        else:
            raise AssertionError(f"{block}: nowhere to run it")

    (check,) = [b for b in blocks if not b.docker and "det agent list" in b.body]
    out = book.outputs[check.line]
    # Both agents, by their hostnames, with the addresses of their own hosts, no problems.
    for gpu in book.gpus:
        assert gpu is not None
        row = rf"^\s*{re.escape(str(gpu.hostname))}\s.*\b{re.escape(gpu.address)}\b"
        assert re.search(row, out, re.M), out
    assert "agent gpu" not in out, out
    assert re.search(r"Experiment \d+ finished with state COMPLETED", out), out
    # Its checkpoints went to the shared directory of the master's configuration.
    checkpoints = book.root(None, "shared") / "mnt" / "shared" / "checkpoints"
    assert any(checkpoints.iterdir()), "no checkpoint in the shared directory"
    assert "listening on 0.0.0.0:8443 (TLS)" in book.logs()
