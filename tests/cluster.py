"""A real local cluster for tests: a master and agents as subprocesses on free ports.

Tests drive it the way a user does, through the `det` CLI (as a subprocess) or the API.
Every process started here is stopped at teardown.
"""

from __future__ import annotations

import asyncio
import json
import os
import pathlib
import signal
import socket
import sqlite3
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.netns import Host

ROOT = pathlib.Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


# What the API shows for an experiment or trial that is stored ACTIVE (Determined's states,
# from what its allocations are doing).
ACTIVE_STATES = ("QUEUED", "PULLING", "STARTING", "RUNNING")


# A directory scripts/postgres/start.sh started a PostgreSQL under: when set, every cluster's
# master keeps its store in a database of its own there (the integration suite on
# PostgreSQL). Unset, masters use SQLite under their data directory.
POSTGRES_ENV = "PYDET_TEST_POSTGRES"


def postgres_database(where: pathlib.Path) -> dict[str, str]:
    """A new database in the PostgreSQL started under ``where``: the master's db: settings."""
    port = (where / "port").read_text().strip()
    name = f"cluster_{uuid.uuid4().hex[:16]}"
    admin = ["psql", "-q", "-h", str(where), "-p", port, "-U", "postgres", "-d", "postgres"]
    subprocess.run(
        [*admin, "-v", "ON_ERROR_STOP=1", "-c", f"CREATE DATABASE {name} OWNER pydet"],
        check=True,
        timeout=30,
        capture_output=True,
    )
    return {
        "type": "postgres",
        "host": "127.0.0.1",
        "port": port,
        "name": name,
        "user": "pydet",
        "password_file": str(where / "password"),
    }


def _on_postgres(db: dict[str, str], query: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
    """``query`` (SQLite's dialect) on PostgreSQL, rewritten as the master rewrites its own."""
    import asyncpg

    from pydet.master.store import dialect

    async def run() -> list[tuple[Any, ...]]:
        conn = await asyncpg.connect(
            host=db["host"],
            port=int(db["port"]),
            database=db["name"],
            user=db["user"],
            password=pathlib.Path(db["password_file"]).read_text().strip(),
            timeout=30,
        )
        try:
            rows = await conn.fetch(dialect.postgres(query)[0], *params, timeout=30)
            return [tuple(row.values()) for row in rows]
        finally:
            await conn.close()

    return asyncio.run(run())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(check: Callable[[], Any], timeout: float, what: str, interval: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


class Cluster:
    def __init__(
        self,
        root: pathlib.Path,
        *,
        reconnect_timeout: float = 10.0,
        master_config: str | None = None,
        ca_file: pathlib.Path | None = None,
        on: Host | None = None,
        listen: str | None = None,
    ) -> None:
        self.root = root
        # The master runs on ``on`` (a network namespace of tests/netns.py), else here.
        self.host = on
        self.master_config = master_config
        # A TLS master (its security.tls is in master_config): the CA that signed its
        # certificate, given to the CLI, the agents and HTTP requests.
        self.ca_file = ca_file
        self.port = free_port()
        # ``listen``: an address of this namespace to serve on other than loopback (the
        # bridge of tests/netns.py, which hosts in namespaces reach).
        self.listen = on.address if on else (listen or "127.0.0.1")
        self.address = f"{self.listen}:{self.port}"
        self.url = f"{'https' if ca_file else 'http'}://{self.address}"
        self.reconnect_timeout = reconnect_timeout
        # Variables the master's process gets on top of ``env`` (a provider's settings).
        self.master_env: dict[str, str] = {}
        self.master: subprocess.Popen[bytes] | None = None
        self.agents: dict[str, subprocess.Popen[bytes]] = {}
        self._token: str | None = None
        # This master's PostgreSQL database (its db: settings), if it keeps its store there.
        self.postgres: dict[str, str] | None = None
        # The interpreter agents run with, hence their tasks' ``python3`` (another virtual
        # environment's, for frameworks that need packages of their own).
        self.agent_python = sys.executable

    @property
    def admin_password(self) -> str:
        """The password the master generated for ``admin`` at its first start."""
        return (self.root / "master" / "admin-password").read_text().strip()

    @property
    def agent_token_file(self) -> pathlib.Path:
        return self.root / "master" / "agent-token"

    @property
    def env(self) -> dict[str, str]:
        """The environment of `det` commands: logged in as admin through DET_USER/DET_PASS,
        with a token cache of this cluster's own."""
        env = {
            **os.environ,
            "DET_MASTER": self.url if self.ca_file else self.address,
            "PYTHONUNBUFFERED": "1",
            "XDG_CONFIG_HOME": str(self.root / "config"),
        }
        if self.ca_file is not None:
            env["DET_MASTER_CERT_FILE"] = str(self.ca_file)
        if (self.root / "master" / "admin-password").exists():
            env.update(DET_USER="admin", DET_PASS=self.admin_password)
        return env

    def login(self, username: str = "admin", password: str | None = None) -> str:
        """A session token from the HTTP API (for ``get`` and ``post``)."""
        body = json.dumps(
            {"username": username, "password": password or self.admin_password}
        ).encode()
        req = urllib.request.Request(
            f"{self.url}/api/v1/auth/login",
            data=body,
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with self.urlopen(req, timeout=30) as r:
            cookie = r.headers.get("set-cookie", "")
        return cookie.split("det_session=", 1)[1].split(";", 1)[0]

    @property
    def token(self) -> str:
        if self._token is None:
            self._token = self.login()
        return self._token

    def request(
        self, path: str, *, method: str = "GET", body: Any = None, token: str | None = None
    ) -> urllib.request.Request:
        """An HTTP API request with the admin's (or ``token``'s) credentials."""
        data = None if body is None else json.dumps(body).encode()
        headers = {"Authorization": f"Bearer {token or self.token}"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        return urllib.request.Request(
            f"{self.url}{path}", data=data, headers=headers, method=method
        )

    def urlopen(self, req: urllib.request.Request | str, timeout: float) -> Any:
        """``urllib.request.urlopen``, verifying a TLS master against ``ca_file``."""
        context = None
        if self.ca_file is not None:
            context = ssl.create_default_context(cafile=str(self.ca_file))
        return urllib.request.urlopen(req, timeout=timeout, context=context)

    def fetch(self, path: str, token: str | None) -> tuple[int, bytes]:
        """GET ``path`` with ``token`` (none: no credentials): its status and body, errors
        included."""
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        req = urllib.request.Request(f"{self.url}{path}", headers=headers)
        try:
            with self.urlopen(req, timeout=30) as r:
                return r.status, bytes(r.read())
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def _spawn(
        self,
        name: str,
        argv: list[str],
        env: dict[str, str] | None = None,
        on: Host | None = None,
    ) -> subprocess.Popen[bytes]:
        log = open(self.root / f"{name}.log", "ab")
        return subprocess.Popen(
            argv if on is None else on.command(argv),
            stdout=log,
            stderr=subprocess.STDOUT,
            env=self.env if env is None else env,
        )

    def start_master(self) -> None:
        self.master = self._spawn(
            "master",
            [
                sys.executable,
                "-m",
                "pydet.master",
                "--host",
                self.listen,
                "--port",
                str(self.port),
                "--data-dir",
                str(self.root / "master"),
                "--agent-reconnect-timeout",
                str(self.reconnect_timeout),
                "--log-level",
                "debug",
                *self._config_flag(),
            ],
            env={**self.env, **self.master_env},
            on=self.host,
        )
        wait_until(self.healthy, 30, "the master to answer /health")

    def _config_flag(self) -> list[str]:
        config = self.master_config
        postgres = os.environ.get(POSTGRES_ENV)
        if postgres:
            if self.postgres is None:  # one database for every start of this master
                self.postgres = postgres_database(pathlib.Path(postgres))
            settings = "".join(f"  {k}: {v}\n" for k, v in self.postgres.items())
            config = (config or "").rstrip("\n") + "\ndb:\n" + settings
        if config is None:
            return []
        path = self.root / "master.yaml"
        path.write_text(config)
        return ["--config-file", str(path)]

    def sql(self, query: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one statement on this master's store, wherever it is (SQLite under its data
        directory, or its PostgreSQL database): the rows it returns. ``query`` is written in
        SQLite's dialect and rewritten for PostgreSQL by the master's own dialect layer, so
        a test reads (or, with the master stopped, changes) the same rows on both stores."""
        if self.postgres is not None:
            return _on_postgres(self.postgres, query, params)
        db = sqlite3.connect(self.root / "master" / "pydet.db", timeout=30)
        try:
            with db:  # commits a write
                return [tuple(row) for row in db.execute(query, params).fetchall()]
        finally:
            db.close()

    def healthy(self) -> bool:
        try:
            with self.urlopen(f"{self.url}/health", timeout=1) as r:
                return bool(r.status == 200)
        except OSError:
            return False

    def stop_master(self, sig: int = signal.SIGTERM) -> None:
        assert self.master is not None
        self.master.send_signal(sig)
        self.master.wait(timeout=30)
        self.master = None

    def start_agent(
        self,
        agent_id: str = "agent-0",
        slots: int = 1,
        runtime: str = "process",
        on: Host | None = None,
    ) -> None:
        self.spawn_agent(agent_id, "--slots", str(slots), "--runtime", runtime, on=on)
        wait_until(
            lambda: any(a["id"] == agent_id and a["connected"] for a in self.agents_json()),
            30,
            f"agent {agent_id} to connect",
        )

    def spawn_agent(
        self, agent_id: str, *flags: str, name: str | None = None, on: Host | None = None
    ) -> pathlib.Path:
        """Start an agent process (logging to NAME.log, returned) without waiting for it."""
        name = name or agent_id
        self.agents[name] = self._spawn(
            name,
            [
                self.agent_python,
                "-m",
                "pydet.agent",
                "--master",
                self.url if self.ca_file else self.address,
                *(["--master-cert-file", str(self.ca_file)] if self.ca_file else []),
                "--agent-id",
                agent_id,
                "--work-dir",
                str(self.root / name),
                "--log-level",
                "debug",
                "--token-file",
                str(self.agent_token_file),
                *flags,
            ],
            # The agent verifies a TLS master by its --master-cert-file flag alone.
            env={k: v for k, v in self.env.items() if k != "DET_MASTER_CERT_FILE"},
            on=on,
        )
        return self.root / f"{name}.log"

    def stop_agent(self, agent_id: str, sig: int = signal.SIGTERM) -> None:
        proc = self.agents.pop(agent_id)
        proc.send_signal(sig)
        proc.wait(timeout=30)

    def agents_json(self) -> list[dict[str, Any]]:
        try:
            with self.urlopen(self.request("/api/v1/agents"), timeout=2) as r:
                return list(json.load(r)["agents"])
        except OSError:
            return []

    def det(
        self, *args: str, check: bool = True, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [sys.executable, "-m", "pydet.cli", *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"det {' '.join(args)} exited {proc.returncode}\n"
                f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
            )
        return proc

    def det_as(
        self, user: str, password: str, *args: str, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        """`det` as another user (DET_USER/DET_PASS), whatever its exit status."""
        return subprocess.run(
            [sys.executable, "-m", "pydet.cli", *args],
            env={**self.env, "DET_USER": user, "DET_PASS": password},
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def create(self, config: pathlib.Path | str, context: pathlib.Path | str, *extra: str) -> int:
        out = self.det("experiment", "create", str(config), str(context), *extra).stdout
        for line in out.splitlines():
            if line.startswith("Created experiment "):
                return int(line.split()[-1])
        raise AssertionError(f"no experiment id in: {out}")

    def experiment(self, exp_id: int) -> dict[str, Any]:
        """The experiment as `det e describe --json` shows it (with its filled config)."""
        (entry,) = json.loads(self.det("experiment", "describe", str(exp_id), "--json").stdout)
        return dict(entry["experiment"])

    def get(self, path: str) -> Any:
        """GET a JSON document from the master's HTTP API (cheap enough to poll)."""
        with self.urlopen(self.request(path), timeout=10) as r:
            return json.load(r)

    def state(self, exp_id: int) -> str:
        exp = self.get(f"/api/v1/experiments/{exp_id}")["experiment"]
        return str(exp["state"]).removeprefix("STATE_")

    def trials(self, exp_id: int) -> list[dict[str, Any]]:
        return list(json.loads(self.det("experiment", "list-trials", str(exp_id), "--json").stdout))

    def wait_state(self, exp_id: int, *states: str, timeout: float = 120) -> str:
        return str(
            wait_until(
                lambda: (s := self.state(exp_id)) in states and s,
                timeout,
                f"experiment {exp_id} to reach {states}",
                interval=0.3,
            )
        )

    def logs(self, trial_id: int, *extra: str) -> str:
        return self.det("trial", "logs", str(trial_id), *extra).stdout

    def close(self) -> None:
        for agent_id in list(self.agents):
            proc = self.agents.pop(agent_id)
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
        if self.master is not None:
            self.master.kill()
            self.master.wait()
            self.master = None

    def dump_logs(self) -> str:
        return "\n".join(
            f"==== {p.name}\n{p.read_text(errors='replace')[-6000:]}"
            for p in self.root.glob("*.log")
        )


def running(c: Cluster, start: Callable[[Cluster], None]) -> Iterator[Cluster]:
    """A fixture's body: ``start`` the cluster, hand it out, print its logs if anything
    fails, stop every process at the end."""
    try:
        start(c)
        yield c
    except BaseException:
        print(c.dump_logs())
        raise
    finally:
        c.close()


def cluster_fixture(tmp_path: pathlib.Path, agents: int = 1, slots: int = 1) -> Iterator[Cluster]:
    def start(c: Cluster) -> None:
        c.start_master()
        for i in range(agents):
            c.start_agent(f"agent-{i}", slots)

    yield from running(Cluster(tmp_path), start)


def one_line_error(cluster: Cluster, *args: str) -> str:
    """`det ARGS` as the admin fails with one line, ``Error: ...``, and no traceback; the
    line."""
    proc = cluster.det(*args, check=False)
    assert proc.returncode == 1, (args, proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), proc.stderr
    return lines[0]


Det = Callable[..., "subprocess.CompletedProcess[str]"]


def local_det(tmp_path: pathlib.Path, data_dir: pathlib.Path) -> Iterator[Det]:
    """A fixture's body: `det` as a user on this machine runs it (no DET_* settings, a config
    and home directory of its own, ``-m localhost:PORT`` given ``master=PORT``); stops the
    `det deploy local` cluster in ``data_dir`` at the end."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DET_USER", "DET_PASS", "DET_MASTER", "DET_MASTER_CERT_FILE")
    }
    env["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    env["HOME"] = str(tmp_path / "home")

    def run(*args: str, master: int | None = None) -> subprocess.CompletedProcess[str]:
        extra = ["-m", f"localhost:{master}"] if master else []
        return subprocess.run(
            [sys.executable, "-m", "pydet.cli", *extra, *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    try:
        yield run
    finally:
        down = run("deploy", "local", "cluster-down", "--data-dir", str(data_dir))
        assert down.returncode == 0, down
