"""README's "Deploying on many machines", the Docker way: its master and agent containers.

The containers use the host's network, so the head node and the GPU node are this machine:
the head node's name is ``localhost`` and its port a free one (the table below), and one
agent runs (two on one machine would share its hostname, their id). Installing, the
certificate, the configuration and the checks are the section's own blocks, as for
processes (tests/multihost/test_deploy_readme.py); the blocks that start det-master and
det-agent as services are the processes' way and are left out.
"""

from __future__ import annotations

import pathlib
import re
import socket
from collections.abc import Iterator

import pytest

from tests import deploy_readme
from tests.cluster import free_port
from tests.deploy_readme import CHECK_SUBSECTION, EVERY_NODE, GPU, HEAD, Runbook

pytestmark = [pytest.mark.docker, pytest.mark.timeout(900)]


@pytest.fixture
def runbook(docker_engine: None, tmp_path: pathlib.Path) -> Iterator[Runbook]:
    substitutions = {"head.example.org": "localhost", "8443": str(free_port())}
    book = Runbook(tmp_path, None, (None,), substitutions)
    try:
        book.prepare()
        yield book
    finally:
        book.close()


def test_the_readme_deploys_with_the_docker_image(runbook: Runbook) -> None:
    book = runbook
    blocks = deploy_readme.blocks()
    # The checks come before the Docker subsection in README, and after the containers here.
    checks = [b for b in blocks if b.subsection == CHECK_SUBSECTION]
    copied = False
    for block in [b for b in blocks if b not in checks] + checks:
        if block.service and not block.docker:
            continue  # det-master and det-agent as processes
        if block.where in (EVERY_NODE, HEAD):
            book.run(block, None)
        elif block.where == GPU:
            if not copied:
                book.copy_to_gpu_nodes()
                copied = True
            book.run(block, None)
        else:
            raise AssertionError(f"{block}: nowhere to run it")
    assert book.containers == ["pydet-master", "pydet-agent"]

    (check,) = [b for b in checks if "det agent list" in b.body]
    out = book.outputs[check.line]
    # The agent in its container: this machine's hostname, its address towards localhost.
    row = rf"^\s*{re.escape(socket.gethostname())}\s.*\b127\.0\.0\.1\b.*\bdocker\b"
    assert re.search(row, out, re.M), out
    assert re.search(r"Experiment \d+ finished with state COMPLETED", out), out
    checkpoints = book.root(None, "shared") / "mnt" / "shared" / "checkpoints"
    assert any(checkpoints.iterdir()), "no checkpoint in the shared directory"
    assert "(TLS)" in book.logs()
