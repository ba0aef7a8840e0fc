"""What roles cost the authorization decision: ``--baseline`` (default: main, where owners
and the admin flag decide) against this checkout (where Determined's roles decide), in
alternating rounds so that both see the same machine load, side by side.

Two tables in one. The decision alone, in process: ``rules.authorize`` for a few kinds of
call (a read every user may make, a change by its owner, by an admin, and a refusal), per
call, against a store with users and experiments. And through a real master (``python -m
pydet.master`` of each tree): --calls sequential gRPC calls of a cheap RPC, per call, as a
user without roles (GetTensorboards: what every user holds) and as the admin (GetWebhooks:
an admin's permission, through the roles on this side), both masters up at once and their
batches interleaved. Each figure is the fastest of five batches (the cost with the least of
the machine's other load in it); the table shows the median of those over the rounds.

    python bench/roles.py [--baseline main] [--rounds 3] [--decisions 20000] [--calls 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import pathlib
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Awaitable, Callable
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parent.parent
TARGET = 5.0  # per cent


async def _decisions(n: int) -> dict[str, float]:
    """Microseconds per ``authorize`` call, by kind (run with the tree's code on the path)."""
    from determined.api.gen import v1
    from determined.common import errors
    from pydet.master.auth import rules as authz
    from pydet.master.auth.callers import UserCaller
    from pydet.master.store.db import Database

    has_admin_flag = "admin" in {f.name for f in dataclasses.fields(UserCaller)}

    def user(user_id: int, name: str, admin: bool) -> Any:
        extra = {"admin": admin} if has_admin_flag else {}
        return UserCaller(id=user_id, username=name, session=f"s-{name}", **extra)

    with tempfile.TemporaryDirectory() as tmp:
        db = Database(pathlib.Path(tmp) / "pydet.db")
        await db.open()
        for user_id, name, admin in ((1, "admin", 1), (2, "alice", 0), (3, "bob", 0)):
            await db.execute(
                "INSERT INTO users (id, username, password_hash, admin, active, modified_at)"
                " VALUES (?, ?, 'h', ?, 1, 0)",
                (user_id, name, admin),
            )
        if await db.fetch_one("SELECT 1 AS x FROM sqlite_master WHERE name = 'role_assignments'"):
            await db.execute("INSERT INTO role_assignments (role_id, user_id) VALUES (1, 1)")
        await db.execute(
            "INSERT INTO experiments (id, state, config, original_config, username, start_time,"
            " job_id) VALUES (1, 'ACTIVE', '{}', '', 'alice', 0, 'job-1')"
        )
        lookup = authz.Lookup(db)
        admin, alice, bob = user(1, "admin", True), user(2, "alice", False), user(3, "bob", False)
        pause = v1.ExperimentActionRequest(experiment_id=1)

        async def refused() -> None:
            try:
                await authz.authorize("/v1.Determined/PauseExperiment", bob, pause, lookup)
            except errors.PermissionDenied:
                return
            raise AssertionError("bob paused alice's experiment")

        def call(rpc: str, caller: Any, message: Any) -> Callable[[], Awaitable[None]]:
            return lambda: authz.authorize(f"/v1.Determined/{rpc}", caller, message, lookup)

        cases: list[tuple[str, Callable[[], Awaitable[None]]]] = [
            ("GetExperiment, any user", call("GetExperiment", bob, v1.GetExperimentRequest())),
            ("PauseExperiment, its owner", call("PauseExperiment", alice, pause)),
            ("PauseExperiment, an admin", call("PauseExperiment", admin, pause)),
            ("PauseExperiment, refused", refused),
            ("PostUser, an admin", call("PostUser", admin, v1.PostUserRequest())),
        ]
        out = {}
        for name, fn in cases:
            batches = []
            for _ in range(5):
                began = time.perf_counter()
                for _ in range(n // 5):
                    await fn()
                batches.append((time.perf_counter() - began) / (n // 5) * 1e6)
            out[f"decision: {name}"] = min(batches)
        await db.close()
        return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start_master(tree: pathlib.Path, where: pathlib.Path) -> tuple[subprocess.Popen[bytes], int]:
    """A master running ``tree``'s code, its store under ``where``; and its port."""
    port = _free_port()
    where.mkdir(parents=True)
    master = subprocess.Popen(
        [
            *(sys.executable, "-m", "pydet.master", "--host", "127.0.0.1", "--port", str(port)),
            *("--data-dir", str(where / "master"), "--log-level", "warning"),
        ],
        stdout=open(where / "master.log", "wb"),
        stderr=subprocess.STDOUT,
        cwd=tree,
        env=dict(os.environ, PYTHONPATH=f"{tree}{os.pathsep}{tree / 'harness'}"),
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1).read()
            return master, port
        except OSError:
            if time.monotonic() > deadline:
                raise SystemExit(f"the master of {tree} did not start") from None
            time.sleep(0.1)


async def _callers(
    port: int, where: pathlib.Path, channels: list[Any]
) -> list[tuple[str, Callable[[], Any]]]:
    """The timed calls on one master: as a user without roles, and as the admin (on one
    connection, added to ``channels`` to be closed)."""
    import grpclib.client

    from determined.api.gen import v1
    from determined.common import wire

    password = (where / "master" / "admin-password").read_text().strip()
    channel = grpclib.client.Channel("127.0.0.1", port, codec=wire.WireCodec())
    channels.append(channel)
    anon = v1.DeterminedStub(channel)
    admin_token = (await anon.login(v1.LoginRequest(username="admin", password=password))).token
    admin = v1.DeterminedStub(channel, metadata={"x-det-token": admin_token})
    await admin.post_user(v1.PostUserRequest(username="alice", password="alice-password"))
    alice_login = v1.LoginRequest(username="alice", password="alice-password")
    alice_token = (await anon.login(alice_login)).token
    alice = v1.DeterminedStub(channel, metadata={"x-det-token": alice_token})
    return [
        (
            "master: GetTensorboards, a user",
            lambda: alice.get_tensorboards(v1.GetTensorboardsRequest()),
        ),
        ("master: GetWebhooks, the admin", lambda: admin.get_webhooks(v1.GetWebhooksRequest())),
    ]


async def _through_masters(
    trees: dict[str, pathlib.Path], args: argparse.Namespace, tmp: pathlib.Path
) -> dict[str, dict[str, list[float]]]:
    """Microseconds per gRPC call, by side and caller: one master per tree, their batches
    interleaved (A B A B ...) so that both meet the same load."""
    sys.path[:0] = [str(ROOT), str(ROOT / "harness")]
    masters = {side: _start_master(tree, tmp / side) for side, tree in trees.items()}
    channels: list[Any] = []
    try:
        calls = {
            side: await _callers(port, tmp / side, channels) for side, (_, port) in masters.items()
        }
        out: dict[str, dict[str, list[float]]] = {side: {} for side in trees}
        batch = max(args.calls // 5, 1)
        for side_calls in calls.values():
            for _, fn in side_calls:
                for _ in range(50):
                    await fn()
        for _ in range(args.rounds * 5):
            for side, side_calls in calls.items():
                for name, fn in side_calls:
                    began = time.perf_counter()
                    for _ in range(batch):
                        await fn()
                    took = (time.perf_counter() - began) / batch * 1e6
                    out[side].setdefault(name, []).append(took)
        return out
    finally:
        for channel in channels:
            channel.close()
        for master, _ in masters.values():
            master.send_signal(signal.SIGTERM)
            master.wait(timeout=30)


def measure(args: argparse.Namespace) -> None:
    print(json.dumps(asyncio.run(_decisions(args.decisions))))


def run(tree: pathlib.Path, args: argparse.Namespace) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=f"{tree}{os.pathsep}{tree / 'harness'}")
    proc = subprocess.run(
        [
            *(sys.executable, str(pathlib.Path(__file__).resolve()), "--measure"),
            *("--decisions", str(args.decisions)),
        ],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    if proc.returncode != 0:
        raise SystemExit(f"the measurement failed in {tree}:\n{proc.stdout}\n{proc.stderr}")
    found: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline", default="main")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--decisions", type=int, default=20_000)
    parser.add_argument("--calls", type=int, default=2_000)
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        measure(args)
        return 0
    results: dict[str, dict[str, list[float]]] = {"baseline": {}, "roles": {}}
    with tempfile.TemporaryDirectory(prefix="pydet-roles-bench-") as tmp:
        base = pathlib.Path(tmp) / "baseline"
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(base), args.baseline],
            check=True,
        )
        try:
            for i in range(args.rounds):
                for side, tree in (("baseline", base), ("roles", ROOT)):
                    for label, value in run(tree, args).items():
                        results[side].setdefault(label, []).append(value)
                    print(f"round {i + 1}/{args.rounds} {side}: done", file=sys.stderr)
            trees = {"baseline": base, "roles": ROOT}
            timed = asyncio.run(_through_masters(trees, args, pathlib.Path(tmp) / "masters"))
            for side, by_name in timed.items():
                for label, batches in by_name.items():
                    # The fastest batch of each round's five.
                    results[side][label] = [
                        min(batches[i : i + 5]) for i in range(0, len(batches), 5)
                    ]
        finally:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)], check=False
            )
    print(
        f"Authorization by roles: {args.baseline} (owners and the admin flag) vs this checkout "
        f"(Determined's roles); microseconds per call, fastest batch, median of {args.rounds} "
        f"alternating rounds; load average {os.getloadavg()[0]:.1f}; target: within {TARGET:g} %"
    )
    print()
    width = max(len(label) for label in results["roles"])
    print(f"{'what':<{width}} | {'baseline':>9} | {'roles':>9} | {'change':>7}")
    print(f"{'-' * width}-+-{'-' * 9}-+-{'-' * 9}-+-{'-' * 7}")
    for label, now in results["roles"].items():
        before = statistics.median(results["baseline"][label])
        after = statistics.median(now)
        change = (after - before) / before * 100
        print(f"{label:<{width}} | {before:>9.2f} | {after:>9.2f} | {change:>+6.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
