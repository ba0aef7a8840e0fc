"""`det deploy local cluster-up|cluster-down`: a master and agents on this machine (the parts
one at a time, master-up, agent-up and the rest, are in ``local_parts``).

cluster-up returns only once the cluster can run work (the master answers /health and every
agent is connected), so `det deploy local cluster-up && det experiment create ...` is safe
in scripts. Anything it started is stopped again if it fails, so a failed attempt leaves
nothing behind but the logs it points to.

A cluster lives in a data directory: ``--data-dir``, else one named by Determined's
``--cluster-name`` (``determined``, the default, is ~/.local/share/pydet/local).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import errno
import importlib.resources as resources
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

import yaml

from determined.api.gen import v1
from determined.common import client, errors
from pydet.cli import Subparsers, auth, deploy_flags, images, local_cluster, local_config
from pydet.cli.local_cluster import ClusterState, Proc
from pydet.cli.local_config import LocalMaster

DEFAULT_DATA_DIR = "~/.local/share/pydet/local"
DEFAULT_CLUSTER_NAME = "determined"
ADMIN = "admin"
READY_TIMEOUT = 30.0
DEFAULT_TASK_IMAGE = images.DEFAULT_TASK_IMAGE


def count_arg(minimum: int, maximum: int | None = None) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < minimum or (maximum is not None and value > maximum):
            bound = f"between {minimum} and {maximum}" if maximum else f">= {minimum}"
            raise argparse.ArgumentTypeError(f"must be {bound}")
        return value

    return parse


def add_parser(nouns: Subparsers) -> None:
    deploy = nouns.add_parser("deploy", help="run a cluster on this machine")
    deploy_flags.add_top_flags(deploy)
    targets = deploy.add_subparsers(dest="target", metavar="TARGET", required=True)
    local = targets.add_parser("local", help="a master and agents as local processes")
    verbs = local.add_subparsers(dest="verb", metavar="COMMAND", required=True)

    up = verbs.add_parser("cluster-up", help="start a master and agents in the background")
    up.add_argument("--master-port", type=count_arg(1, 65535), default=8080, metavar="P")
    up.add_argument(
        "--host",
        default="127.0.0.1",
        help="address the master listens on (default: 127.0.0.1, this machine only)",
    )
    up.add_argument(
        "--agents",
        type=count_arg(0),
        default=1,
        metavar="N",
        help="number of agents (0: the master alone; cluster-up returns once it is healthy)",
    )
    up.add_argument(
        "--slots",
        type=count_arg(1),
        metavar="M",
        help="artificial slots per agent (default: the GPUs the agent finds, else 1)",
    )
    add_cluster_flags(up)
    up.add_argument(
        "--runtime",
        choices=("process", "docker"),
        default="process",
        help="how agents run tasks: plain processes, or Docker containers (default: process)",
    )
    up.add_argument(
        "--default-image",
        default=None,
        metavar="IMAGE",
        help=f"docker runtime: image for tasks whose config names none "
        f"(default: {DEFAULT_TASK_IMAGE}, built locally when missing)",
    )
    add_master_flags(up)
    add_gpu_flags(up)
    deploy_flags.add_process_flags(up, images=False)
    deploy_flags.add_master_setting_flags(up)
    up.set_defaults(func=cluster_up)

    down = verbs.add_parser("cluster-down", help="stop the local cluster")
    add_cluster_flags(down)
    add_delete_db_flag(down, "after stopping it")
    down.set_defaults(func=cluster_down)

    # Imported here: local_parts uses this module's helpers.
    from pydet.cli import local_parts

    local_parts.add_parsers(verbs)


def add_cluster_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--cluster-name",
        default=DEFAULT_CLUSTER_NAME,
        metavar="NAME",
        help=f"which local cluster (its data directory; default: {DEFAULT_CLUSTER_NAME})",
    )
    p.add_argument(
        "--data-dir",
        default=None,
        metavar="DIR",
        help=f"the cluster's data directory (default: {DEFAULT_DATA_DIR} for the default "
        "cluster name, else ~/.local/share/pydet/local-NAME)",
    )


def add_delete_db_flag(p: argparse.ArgumentParser, when: str) -> None:
    p.add_argument(
        "--delete-db", action="store_true", help=f"remove the master's store (SQLite) {when}"
    )


def add_gpu_flags(p: argparse.ArgumentParser) -> None:
    gpu = p.add_mutually_exclusive_group()
    gpu.add_argument(
        "--gpu",
        dest="gpu",
        action="store_true",
        default=True,
        help="agents use the GPUs they find (the default)",
    )
    gpu.add_argument(
        "--no-gpu",
        dest="gpu",
        action="store_false",
        help="agents ignore GPUs and offer artificial CPU slots (--slots, default 1)",
    )


def add_master_flags(p: argparse.ArgumentParser) -> None:
    config = p.add_mutually_exclusive_group()
    config.add_argument(
        "--master-config",
        "--master-config-path",
        dest="master_config",
        type=Path,
        default=None,
        metavar="FILE",
        help="YAML master config merged over cluster-up's own settings for its master (FILE's "
        "keys win, even over --master-port and --host; mappings merge key by key; "
        "resource_pools and other lists are replaced whole)",
    )
    config.add_argument(
        "--storage-host-path",
        type=Path,
        default=None,
        metavar="DIR",
        help="keep checkpoints in DIR (a shared_fs checkpoint storage)",
    )
    p.add_argument(
        "--initial-user-password",
        default=None,
        metavar="PASSWORD",
        help="the admin's password on a new cluster (default: a generated one, in a file)",
    )
    add_delete_db_flag(p, "before starting: a new, empty cluster")


def data_dir_of(args: argparse.Namespace) -> Path:
    """The cluster's data directory: --data-dir, else the one of its --cluster-name."""
    if args.data_dir:
        return Path(args.data_dir).expanduser().resolve()
    name = getattr(args, "cluster_name", DEFAULT_CLUSTER_NAME)
    if not name or "/" in name or name in (".", ".."):
        raise errors.InvalidArgument(f"--cluster-name: {name!r} cannot name a directory")
    base = DEFAULT_DATA_DIR if name == DEFAULT_CLUSTER_NAME else f"{DEFAULT_DATA_DIR}-{name}"
    return Path(base).expanduser().resolve()


def prepare_master(args: argparse.Namespace, data_dir: Path) -> LocalMaster:
    """The master's config: cluster-up's defaults, --master-config over them, or the
    --storage-host-path storage."""
    storage = getattr(args, "storage_host_path", None)
    user_file = getattr(args, "master_config", None)
    user = local_config.read(user_file) if user_file is not None else {}
    extra = deploy_flags.master_settings(args, data_dir, user) or None
    if storage is not None:
        storage.expanduser().mkdir(parents=True, exist_ok=True)
        extra = {
            **(extra or {}),
            "checkpoint_storage": {"type": "shared_fs", "host_path": str(storage)},
        }
    return local_config.prepare(
        user_file,
        port=args.master_port,
        host=getattr(args, "host", "127.0.0.1"),
        data_dir=data_dir,
        settings=extra,
    )


def delete_db(master: LocalMaster) -> None:
    """Remove the master's SQLite store (and the password generated with it)."""
    if master.config_file is not None:
        settings = yaml.safe_load(master.config_file.read_text()) or {}
        if (settings.get("db") or {}).get("type") == "postgres":
            raise errors.FailedPrecondition(
                "--delete-db: the master keeps its store in PostgreSQL; drop that database there"
            )
    for name in ("pydet.db", "pydet.db-wal", "pydet.db-shm", "admin-password"):
        (master.data_dir / name).unlink(missing_ok=True)


def set_initial_password(port: int, master: LocalMaster, password: str) -> None:
    """The admin's password on a cluster whose admin still has the generated one."""

    async def change() -> bool:
        async with client.session(f"127.0.0.1:{port}") as s:
            try:
                generated = master.admin_password_file.read_text().strip()
                await auth.login(s, ADMIN, generated, active=True)
            except (OSError, errors.Unauthenticated):
                return False
            req = v1.SetUserPasswordRequest(username=ADMIN, password=password)
            await s.call(s.stub.set_user_password(req))
            await auth.login(s, ADMIN, password, active=True)
            return True

    if asyncio.run(change()):
        local_config.write_secret(master.admin_password_file, password)
        print(f"Set the {ADMIN} password given with --initial-user-password")
    else:
        print(
            f"The {ADMIN} password was changed before; --initial-user-password is for a new "
            "cluster (add --delete-db to start one)",
            file=sys.stderr,
        )


def master_argv(
    port: int, data_dir: Path, host: str = "127.0.0.1", *, config_file: Path | None = None
) -> list[str]:
    # -P: a `master.py` in the user's working directory must not shadow the package.
    argv = [sys.executable, "-P", "-m", "pydet.master"]
    if config_file is not None:  # it holds the address and data directory (local_config.py)
        return [*argv, "--config-file", str(config_file)]
    argv += ["--host", host, "--port", str(port)]
    return [*argv, "--data-dir", str(data_dir / "master")]


def agent_argv(
    port: int,
    agent_id: str,
    work_dir: Path,
    slots: int | None,
    runtime: str,
    *,
    default_image: str | None = None,
    token_file: Path | None = None,
    resource_pool: str | None = "default",
    master_host: str = "localhost",
    config_file: Path | None = None,
) -> list[str]:
    argv = [sys.executable, "-P", "-m", "pydet.agent", "--master", f"{master_host}:{port}"]
    if config_file is not None:  # first: the flags after it win
        argv += ["--config-file", str(config_file)]
    if token_file is not None:
        argv += ["--token-file", str(token_file)]
    argv += ["--agent-id", agent_id, "--work-dir", str(work_dir)]
    if resource_pool is not None:  # None: the agent's config file says
        argv += ["--resource-pool", resource_pool]
    if default_image:
        argv += ["--default-image", default_image]
    argv += ["--runtime", runtime]
    # Without --slots the agent uses the GPUs it finds, else one artificial slot.
    return argv if slots is None else [*argv, "--slots", str(slots)]


def port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # SO_REUSEADDR, as the master sets it: a port in TIME_WAIT is not "in use".
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("", port))
        except OSError as e:
            return e.errno == errno.EADDRINUSE
    return False


def healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as resp:
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError, ValueError):
        return False


def cluster_up(args: argparse.Namespace) -> int:
    deploy_flags.check(args)
    data_dir = data_dir_of(args)
    old = local_cluster.read_state(data_dir)
    if old is not None:
        up = old.master is not None and healthy(old.port)
        if up and all(local_cluster.alive(p) for p in old.procs):
            print(f"A local cluster is already running: master at http://localhost:{old.port}")
            print(f"(DET_MASTER=localhost:{old.port}); stop it with det deploy local cluster-down")
            return 0
        # What is left of a cluster that crashed or was half stopped.
        local_cluster.stop(old.agents)
        local_cluster.stop(old.procs[: len(old.procs) - len(old.agents)])
        local_cluster.remove_state(data_dir)
    master = prepare_master(args, data_dir)
    if args.delete_db:
        delete_db(master)
    port = master.port
    if not args.no_preflight_checks and port_in_use(port):
        raise errors.FailedPrecondition(f"port {port} is in use; choose another with --master-port")
    if args.runtime == "docker":
        args.default_image = args.default_image or DEFAULT_TASK_IMAGE
        ensure_task_image(args.default_image)
    elif args.default_image:
        raise errors.InvalidArgument("--default-image needs --runtime docker")
    data_dir.mkdir(parents=True, exist_ok=True)
    print(f"Starting a master and {args.agents} agent(s); logs in {data_dir}", flush=True)
    started: list[Proc] = []
    try:
        start_and_wait(args, data_dir, started, master)
    except BaseException:
        local_cluster.stop(started[1:])  # the agents, then the master
        local_cluster.stop(started[:1])
        local_cluster.remove_state(data_dir)
        raise
    if args.initial_user_password is not None:
        set_initial_password(port, master, args.initial_user_password)
    if args.no_wait_for_master:
        print(f"Started a master at http://localhost:{port} and {args.agents} agent(s), not")
        print(f"waiting for them (--no-wait-for-master); logs in {data_dir}")
        return 0
    print(f"Master at http://localhost:{port} (DET_MASTER=localhost:{port})")
    print(
        f"Logged in as {ADMIN}; the {ADMIN} password (for the WebUI and other machines) is in "
        f"{master.admin_password_file}"
    )
    # Not through pydet.master.gateway, which would import the whole master into `det`.
    built = resources.files("pydet.master").joinpath("gateway", "webui", "index.html").is_file()
    print(f"WebUI at http://localhost:{port}/" + ("" if built else " (run scripts/webui.sh build)"))
    print("Stop it with: det deploy local cluster-down")
    print(f"Cluster ready: 1 master, {args.agents} agents")
    return 0


def start_and_wait(
    args: argparse.Namespace,
    data_dir: Path,
    started: list[Proc],
    local: LocalMaster | None = None,
) -> None:
    """Start the master, wait for /health, start the agents, wait until all are connected.

    `started` is filled as processes start, so the caller can stop them on any failure.
    `local` is the master's config (local_config.py); none: cluster-up's defaults.
    """
    if local is None:
        local = local_config.prepare(
            None, port=args.master_port, host="127.0.0.1", data_dir=data_dir
        )
    port = local.port
    deadline = time.monotonic() + READY_TIMEOUT
    listen = getattr(args, "host", "127.0.0.1")
    argv = master_argv(port, data_dir, listen, config_file=local.config_file)
    name = deploy_flags.master_name(args)
    master = local_cluster.start(name, argv, data_dir / "master.log", data_dir)
    started.append(master)
    agents: list[Proc] = []
    host = socket.gethostname()
    local_cluster.write_state(data_dir, ClusterState(port, master, agents))
    wait = not getattr(args, "no_wait_for_master", False)
    while wait and not healthy(port):
        check_alive(master)
        if time.monotonic() > deadline:
            fail(master, f"did not answer http://localhost:{port}/health")
        time.sleep(0.2)
    # --no-gpu: artificial slots even where there are GPUs.
    slots = args.slots if args.slots is not None or getattr(args, "gpu", True) else 1
    for i in range(args.agents):
        agent_id = f"{host}-{i}"
        work_dir = data_dir / f"agent-{i}"
        work_dir.mkdir(exist_ok=True)
        argv = agent_argv(
            port,
            agent_id,
            work_dir,
            slots,
            args.runtime,
            default_image=args.default_image,
            token_file=local.agent_token_file,
            resource_pool=local.resource_pool,
        )
        log = data_dir / f"agent-{i}.log"
        agents.append(local_cluster.start(agent_id, argv, log, data_dir))
        started.append(agents[-1])
        local_cluster.write_state(data_dir, ClusterState(port, master, agents))
    if wait:
        asyncio.run(_wait_for_agents(port, master, agents, deadline, local.admin_password_file))


async def _wait_for_agents(
    port: int, master: Proc, agents: list[Proc], deadline: float, password_file: Path
) -> None:
    async with client.session(f"127.0.0.1:{port}") as s:
        # The local CLI logs in as admin with the password the master generated.
        password = password_file.read_text().strip()
        await auth.login(s, ADMIN, password, active=True)
        while True:
            for p in [master, *agents]:
                check_alive(p)
            resp = await s.call(s.stub.get_agents(v1.GetAgentsRequest()))
            connected = {a.id for a in resp.agents if a.connected}
            missing = [a for a in agents if a.name not in connected]
            if not missing:
                return
            if time.monotonic() > deadline:
                fail(missing[0], "did not connect to the master")
            await asyncio.sleep(0.2)


def ensure_task_image(image: str) -> None:
    """Make sure the local Docker engine has ``image``, building the default one if not.

    There is no registry to pull from, so a missing default image is built here from the
    pydet installed here (``pydet.cli.images``); any other missing image is the user's to build.
    """
    if asyncio.run(_image_present(image)):
        print(f"Tasks without environment.image run in Docker image {image}")
        return
    if image != DEFAULT_TASK_IMAGE:
        raise errors.FailedPrecondition(
            f"Docker image {image} is not in the local engine and there is no registry to pull "
            f"it from; build it (docker build --network host -t {image} ...) or leave out "
            f"--default-image to use {DEFAULT_TASK_IMAGE}"
        )
    print(
        f"Docker image {image} is missing: building it from pydet as installed in "
        f"{images.installed_at()} (a first build takes a few minutes)",
        flush=True,
    )
    try:
        images.build(dataclasses.replace(images.Settings.from_env(), task=image))
    except subprocess.TimeoutExpired as e:
        raise errors.DetError(f"building {image}: {e.cmd[0]} did not finish in time") from None
    print(f"Tasks without environment.image run in Docker image {image}")


async def _image_present(image: str) -> bool:
    # Imported here: only the docker runtime needs aiohttp, and `det` should start fast.
    import aiodocker
    import aiohttp

    url = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    async with aiodocker.Docker(url=url) as docker:
        try:
            await docker.images.inspect(image)
        except aiodocker.DockerError as e:
            if e.status == 404:
                return False
            raise errors.FailedPrecondition(
                f"cannot reach the Docker engine at {url}: {e.message}. Start one (on Debian: "
                "scripts/docker/install.sh), set DOCKER_HOST, or use --runtime process"
            ) from None
        except aiohttp.ClientError as e:
            raise errors.FailedPrecondition(
                f"cannot reach the Docker engine at {url}: {e}; or use --runtime process"
            ) from None
    return True


def check_alive(p: Proc) -> None:
    # `p` is our own child here, so waitpid knows for sure; the command-line identity check
    # of `local_cluster.alive` is for pids read back from the state file.
    code = local_cluster.exit_code(p)
    if code is not None:
        fail(p, f"exited with code {code}", timed_out=False)
    try:
        os.kill(p.pid, 0)
    except ProcessLookupError:
        fail(p, "exited", timed_out=False)


def fail(p: Proc, what: str, *, timed_out: bool = True) -> NoReturn:
    within = f" within {READY_TIMEOUT:.0f} s" if timed_out else ""
    who = "the master" if "pydet.master" in p.argv else f"agent {p.name}"
    raise errors.DetError(
        f"{who} {what}{within}; last lines of {p.log}:\n{local_cluster.log_tail(p.log)}"
    )


def cluster_down(args: argparse.Namespace) -> int:
    data_dir = data_dir_of(args)
    state = local_cluster.read_state(data_dir)
    if state is None:
        print(f"No local cluster is running (no {local_cluster.STATE_FILE} in {data_dir})")
        if args.delete_db:
            delete_db(local_config.recorded(data_dir))
        return 0
    running = [p for p in state.procs if local_cluster.alive(p)]
    # Agents first, so they can end their tasks and report it while the master still listens.
    masters = [state.master] if state.master is not None else []
    killed = local_cluster.stop(state.agents) + local_cluster.stop(masters)
    local_cluster.remove_state(data_dir)
    if args.delete_db:
        delete_db(local_config.recorded(data_dir))
        print(f"Removed the master's store in {data_dir / 'master'}")
    for p in killed:
        print(f"{p.name} (pid {p.pid}) did not stop within 15 s and was killed", file=sys.stderr)
    if running:
        print(f"Stopped the local cluster (1 master, {len(state.agents)} agents)")
    else:
        print("No local cluster is running (its processes had already exited; state cleared)")
    return 0
