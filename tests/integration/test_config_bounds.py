"""A config or context built to be expensive is refused by the master itself, cheaply."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import time
import urllib.error

import pytest

from tests.cluster import Cluster

MINIMAL = "entrypoint: python3 train.py\nsearcher: {name: single, metric: x}\n"


def laughs(levels: int) -> str:
    lines = ["data:", "  l0: &l0 [" + ", ".join(['"lol"'] * 9) + "]"]
    for level in range(1, levels):
        lines.append(f"  l{level}: &l{level} [" + ", ".join([f"*l{level - 1}"] * 9) + "]")
    return MINIMAL + "\n".join(lines) + "\n"


def rss_bytes(pid: int) -> int:
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


@pytest.mark.parametrize("validate_only", [True, False], ids=["preview", "create"])
def test_the_master_refuses_a_billion_laughs_without_growing(
    cluster: Cluster, validate_only: bool
) -> None:
    assert cluster.master is not None
    before = rss_bytes(cluster.master.pid)
    started = time.monotonic()
    for _ in range(5):  # Determined's issue: each create grew the master by ~300 MB
        with pytest.raises(urllib.error.HTTPError) as refused:
            cluster.urlopen(
                cluster.request(
                    "/api/v1/experiments",
                    method="POST",
                    body={"config": laughs(7), "validate_only": validate_only},
                ),
                timeout=30,
            )
        assert refused.value.code == 400
        assert "once its aliases (*name)" in json.loads(refused.value.read())["error"]["error"]
    assert time.monotonic() - started < 10
    assert rss_bytes(cluster.master.pid) - before < 20 * 1024 * 1024


def test_a_body_nested_200000_levels_deep_is_a_400(cluster: Cluster) -> None:
    deep = b"[" * 200_000 + b"]" * 200_000
    req = cluster.request("/api/v1/experiments", method="POST")
    req.data = deep
    req.add_header("Content-Type", "application/json")
    with pytest.raises(urllib.error.HTTPError) as refused:
        cluster.urlopen(req, timeout=30)
    assert refused.value.code == 400
    assert (
        json.loads(refused.value.read())["error"]["error"] == "request body: JSON nested too deeply"
    )
    assert "Traceback" not in (cluster.root / "master.log").read_text()


# Sent over gRPC as the CLI would, but with a context the CLI would never pack: one member
# whose header declares 3 GB of zeros.
_SEND_CONTEXT = """
import gzip, sys, tarfile
from determined.api.gen import v1
from determined.common import errors
from pydet.cli import rpc

info = tarfile.TarInfo("zeros.bin")
info.size = 3 * 1024**3
context = gzip.compress(info.tobuf(format=tarfile.GNU_FORMAT))
request = v1.CreateExperimentRequest(
    config="entrypoint: python3 zeros.py\\nsearcher: {name: single, metric: x}\\n",
    context=context,
)

async def body(s):
    return await s.call(s.stub.create_experiment(request))

try:
    rpc.run(None, body)
except errors.DetError as e:
    print(e.message)
    sys.exit(1)
"""


def test_the_master_refuses_a_context_that_unpacks_past_the_cap(cluster: Cluster) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _SEND_CONTEXT],
        env=cluster.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "unpacks to more than the 95 MiB limit" in proc.stdout
    assert "Traceback" not in proc.stderr
    assert cluster.det("experiment", "list", "--json").stdout.strip() in ("[]", "")
