"""The books of the command cloud: what ``launch``, ``terminate`` and ``list`` keep.

Standard library only: the scripts run with any python3. The directory (``$PYDET_TEST_CLOUD_DIR``)
holds ``instances/<id>.json`` (the record ``list`` prints) and ``instances/<id>.userdata``
(the script the instance boots with), a counter for ids, and ``lock``, which every reader
that writes back and every writer holds (flock) so that the scripts and tests/cloud.py,
which boots and kills the hosts and moves the states on, never lose each other's changes.
Records are replaced whole (a write to a temporary file, then a rename).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pathlib
import time
from collections.abc import Iterable, Iterator
from typing import Any

ENV = "PYDET_TEST_CLOUD_DIR"
STATES = ("starting", "running", "stopping", "terminated")
# With a message in this file, ``launch`` fails (no capacity, a quota): exit 1, the message
# on stderr, nothing launched.
LAUNCH_FAILS = "launch.fail"


class Store:
    def __init__(self, root: pathlib.Path | str) -> None:
        self.root = pathlib.Path(root)
        self.dir = self.root / "instances"
        self.dir.mkdir(parents=True, exist_ok=True)

    @classmethod
    def from_env(cls) -> Store:
        root = os.environ.get(ENV)
        if not root:
            raise SystemExit(f"{ENV} is not set: the directory of the cloud's state")
        return cls(root)

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        with (self.root / "lock").open("a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def records(self) -> list[dict[str, Any]]:
        """Every instance's record, the oldest first."""
        out = []
        for path in self.dir.glob("*.json"):
            with contextlib.suppress(FileNotFoundError, ValueError):
                out.append(json.loads(path.read_text()))
        return sorted(out, key=lambda r: (r["launched_at"], r["id"]))

    def record(self, instance_id: str) -> dict[str, Any] | None:
        try:
            return dict(json.loads((self.dir / f"{instance_id}.json").read_text()))
        except (FileNotFoundError, ValueError):
            return None

    def write(self, record: dict[str, Any]) -> None:
        path = self.dir / f"{record['id']}.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(record, sort_keys=True) + "\n")
        tmp.replace(path)

    def user_data(self, instance_id: str) -> bytes:
        return (self.dir / f"{instance_id}.userdata").read_bytes()

    def launch(self, agent_id: str, user_data: bytes) -> str:
        """A new instance, ``starting``, that will boot with ``user_data`` and whose agent
        registers as ``agent_id``."""
        with self.locked():
            fails = self.root / LAUNCH_FAILS
            if fails.exists():
                raise SystemExit(fails.read_text().strip() or "launch refused")
            counter = self.root / "next_id"
            number = int(counter.read_text()) if counter.exists() else 1
            counter.write_text(str(number + 1))
            instance_id = f"ci-{number:06d}"
            (self.dir / f"{instance_id}.userdata").write_bytes(user_data)
            self.write(
                {
                    "id": instance_id,
                    "state": "starting",
                    "launched_at": round(time.time(), 3),
                    "agent_id": agent_id,
                }
            )
            return instance_id

    def terminate(self, instance_ids: Iterable[str]) -> list[str]:
        """Asks each instance to stop (``stopping``); returns the ids that do not exist."""
        unknown = []
        with self.locked():
            for instance_id in instance_ids:
                record = self.record(instance_id)
                if record is None:
                    unknown.append(instance_id)
                elif record["state"] in ("starting", "running"):
                    self.write({**record, "state": "stopping"})
        return unknown

    def move(self, instance_id: str, from_state: str, to_state: str, **fields: Any) -> bool:
        """Moves the instance on, only if it is still in ``from_state``; whether it did."""
        with self.locked():
            record = self.record(instance_id)
            if record is None or record["state"] != from_state:
                return False
            self.write({**record, **fields, "state": to_state})
            return True
