"""`det deploy local cluster-up|cluster-down`: a master and agents on this machine.

cluster-up returns only once the cluster can run work (the master answers /health and every
agent is connected), so `det deploy local cluster-up && det experiment create ...` is safe
in scripts. Anything it started is stopped again if it fails, so a failed attempt leaves
nothing behind but the logs it points to.
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

from determined.api.gen import v1
from determined.common import client, errors
from pydet.cli import Subparsers, auth, images, local_cluster, local_config
from pydet.cli.local_cluster import ClusterState, Proc
from pydet.cli.local_config import LocalMaster

DEFAULT_DATA_DIR = "~/.local/share/pydet/local"
ADMIN = "admin"
READY_TIMEOUT = 30.0
DEFAULT_TASK_IMAGE = images.DEFAULT_TASK_IMAGE


def _count(minimum: int, maximum: int | None = None) -> Callable[[str], int]:
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
    targets = deploy.add_subparsers(dest="target", metavar="TARGET", required=True)
    local = targets.add_parser("local", help="a master and agents as local processes")
    verbs = local.add_subparsers(dest="verb", metavar="COMMAND", required=True)

    up = verbs.add_parser("cluster-up", help="start a master and agents in the background")
    up.add_argument("--master-port", type=_count(1, 65535), default=8080, metavar="P")
    up.add_argument(
        "--host",
        default="127.0.0.1",
        help="address the master listens on (default: 127.0.0.1, this machine only)",
    )
    up.add_argument(
        "--agents",
        type=_count(0),
        default=1,
        metavar="N",
        help="number of agents (0: the master alone; cluster-up returns once it is healthy)",
    )
    up.add_argument(
        "--slots",
        type=_count(1),
        metavar="M",
        help="artificial slots per agent (default: the GPUs the agent finds, else 1)",
    )
    up.add_argument("--data-dir", default=DEFAULT_DATA_DIR, metavar="DIR")
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
    up.add_argument(
        "--master-config",
        type=Path,
        default=None,
        metavar="FILE",
        help="YAML master config merged over cluster-up's own settings for its master (FILE's "
        "keys win, even over --master-port and --host; mappings merge key by key; "
        "resource_pools and other lists are replaced whole)",
    )
    up.set_defaults(func=cluster_up)

    down = verbs.add_parser("cluster-down", help="stop the local cluster")
    down.add_argument("--data-dir", default=DEFAULT_DATA_DIR, metavar="DIR")
    down.set_defaults(func=cluster_down)


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
    resource_pool: str = "default",
) -> list[str]:
    argv = [sys.executable, "-P", "-m", "pydet.agent", "--master", f"localhost:{port}"]
    if token_file is not None:
        argv += ["--token-file", str(token_file)]
    argv += ["--agent-id", agent_id, "--work-dir", str(work_dir), "--resource-pool", resource_pool]
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
    data_dir = Path(args.data_dir).expanduser().resolve()
    old = local_cluster.read_state(data_dir)
    if old is not None:
        if all(local_cluster.alive(p) for p in old.procs) and healthy(old.port):
            print(f"A local cluster is already running: master at http://localhost:{old.port}")
            print(f"(DET_MASTER=localhost:{old.port}); stop it with det deploy local cluster-down")
            return 0
        # What is left of a cluster that crashed or was half stopped.
        local_cluster.stop(old.agents)
        local_cluster.stop([old.master])
        local_cluster.remove_state(data_dir)
    master = local_config.prepare(
        getattr(args, "master_config", None),
        port=args.master_port,
        host=getattr(args, "host", "127.0.0.1"),
        data_dir=data_dir,
    )
    port = master.port
    if port_in_use(port):
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
    master = local_cluster.start("master", argv, data_dir / "master.log", data_dir)
    started.append(master)
    agents: list[Proc] = []
    host = socket.gethostname()
    local_cluster.write_state(data_dir, ClusterState(port, master, agents))
    while not healthy(port):
        _check_alive(master)
        if time.monotonic() > deadline:
            _fail(master, f"did not answer http://localhost:{port}/health")
        time.sleep(0.2)
    for i in range(args.agents):
        agent_id = f"{host}-{i}"
        work_dir = data_dir / f"agent-{i}"
        work_dir.mkdir(exist_ok=True)
        argv = agent_argv(
            port,
            agent_id,
            work_dir,
            args.slots,
            args.runtime,
            default_image=args.default_image,
            token_file=local.agent_token_file,
            resource_pool=local.resource_pool,
        )
        log = data_dir / f"agent-{i}.log"
        agents.append(local_cluster.start(agent_id, argv, log, data_dir))
        started.append(agents[-1])
        local_cluster.write_state(data_dir, ClusterState(port, master, agents))
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
                _check_alive(p)
            resp = await s.call(s.stub.get_agents(v1.GetAgentsRequest()))
            connected = {a.id for a in resp.agents if a.connected}
            missing = [a for a in agents if a.name not in connected]
            if not missing:
                return
            if time.monotonic() > deadline:
                _fail(missing[0], "did not connect to the master")
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


def _check_alive(p: Proc) -> None:
    # `p` is our own child here, so waitpid knows for sure; the command-line identity check
    # of `local_cluster.alive` is for pids read back from the state file.
    code = local_cluster.exit_code(p)
    if code is not None:
        _fail(p, f"exited with code {code}", timed_out=False)
    try:
        os.kill(p.pid, 0)
    except ProcessLookupError:
        _fail(p, "exited", timed_out=False)


def _fail(p: Proc, what: str, *, timed_out: bool = True) -> NoReturn:
    within = f" within {READY_TIMEOUT:.0f} s" if timed_out else ""
    who = "the master" if p.name == "master" else f"agent {p.name}"
    raise errors.DetError(
        f"{who} {what}{within}; last lines of {p.log}:\n{local_cluster.log_tail(p.log)}"
    )


def cluster_down(args: argparse.Namespace) -> int:
    data_dir = Path(args.data_dir).expanduser().resolve()
    state = local_cluster.read_state(data_dir)
    if state is None:
        print(f"No local cluster is running (no {local_cluster.STATE_FILE} in {data_dir})")
        return 0
    running = [p for p in state.procs if local_cluster.alive(p)]
    # Agents first, so they can end their tasks and report it while the master still listens.
    killed = local_cluster.stop(state.agents) + local_cluster.stop([state.master])
    local_cluster.remove_state(data_dir)
    for p in killed:
        print(f"{p.name} (pid {p.pid}) did not stop within 15 s and was killed", file=sys.stderr)
    if running:
        print(f"Stopped the local cluster (1 master, {len(state.agents)} agents)")
    else:
        print("No local cluster is running (its processes had already exited; state cleared)")
    return 0
