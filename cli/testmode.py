"""Test mode and local runs: `det experiment create [-t/--test-mode] [--local]`.

Test mode submits a shortened copy of the experiment (one trial, a short searcher length,
no restarts, `DET_TEST_MODE=1` for Trial classes) to catch mistakes before spending a
cluster's time. `--local` runs on this machine without a deployed cluster: a throw-away
master and agent start in a temporary directory, run the experiment, and stop again.
"""

from __future__ import annotations

import argparse
import contextlib
import socket
import tempfile
from pathlib import Path
from typing import Any

import yaml

from determined.common import expconf
from pydet.cli import auth, deploy, local_cluster

# How far a test run trains, per unit of searcher.max_length.
_SHORT = {"batches": 10, "records": 100, "epochs": 1}


def shorten(text: str) -> str:
    """The test-mode version of a config (YAML in, YAML out)."""
    data: dict[str, Any] = expconf.load_yaml(text)
    searcher = dict(data.get("searcher") or {})
    # pbt has no max_length: a round's length gives the unit.
    length = searcher.get("max_length") or searcher.get("length_per_round")
    if isinstance(length, dict) and len(length) == 1:
        ((unit, value),) = length.items()
        short: Any = {unit: min(int(value), _SHORT.get(unit, 1))}
    else:
        short = 1
    data["searcher"] = {
        key: searcher[key]
        for key in ("metric", "smaller_is_better", "source_trial_id", "source_checkpoint_uuid")
        if key in searcher
    }
    data["searcher"].update(name="single", max_length=short)
    data["max_restarts"] = 0
    data["name"] = f"{data.get('name') or 'experiment'} (test mode)"
    env = dict(data.get("environment") or {})
    variables = env.get("environment_variables") or []
    if isinstance(variables, dict):
        variables = {k: [*(v or []), "DET_TEST_MODE=1"] for k, v in variables.items()}
    else:
        variables = [*variables, "DET_TEST_MODE=1"]
    env["environment_variables"] = variables
    data["environment"] = env
    return yaml.safe_dump(data, sort_keys=False)


def slots_needed(text: str) -> int:
    data = expconf.load_yaml(text)
    resources = data.get("resources") or {}
    return int(resources.get("slots_per_trial", 1) or 0)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalCluster:
    """A master and one agent for the length of one local run."""

    def __init__(self, slots: int) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="pydet-local-")
        self.data_dir = Path(self._tmp.name)
        self.port = _free_port()
        self._slots = max(1, slots)
        self._procs: list[local_cluster.Proc] = []

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def __enter__(self) -> LocalCluster:
        args = argparse.Namespace(
            master_port=self.port,
            agents=1,
            slots=self._slots,
            runtime="process",
            default_image=None,
        )
        print(f"Starting a local master and agent in {self.data_dir}", flush=True)
        try:
            deploy.start_and_wait(args, self.data_dir, self._procs)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(OSError):
            auth.forget(self.address, deploy.ADMIN)
        local_cluster.stop(self._procs[1:])
        local_cluster.stop(self._procs[:1])
        self._procs.clear()
        self._tmp.cleanup()
