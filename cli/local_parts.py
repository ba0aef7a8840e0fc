"""`det deploy local master-up|master-down|agent-up|agent-down|logs`: the parts of a local
cluster one at a time (Determined's verbs; `cluster-up` and `cluster-down` are in ``deploy``).

A master started with master-up and agents started with agent-up are the same local cluster
as cluster-up's, in the same data directory and state file: cluster-down stops them all,
master-down only the master (its agents wait for the next one), agent-down one agent or
all of them.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import sys
import time
from pathlib import Path

from determined.api.gen import v1
from determined.common import client, errors
from pydet.cli import Subparsers, auth, deploy, deploy_flags, local_cluster, local_config
from pydet.cli.local_cluster import ClusterState, Proc

# Determined's default agent name, det-agent-HOSTNAME; more agents get -2, -3, ...
DEFAULT_AGENT = f"det-agent-{socket.gethostname()}"


def add_parsers(verbs: Subparsers) -> None:
    p = verbs.add_parser("master-up", help="start a local master alone (agents: agent-up)")
    p.add_argument("--master-port", type=deploy.count_arg(1, 65535), default=8080, metavar="P")
    p.add_argument("--host", default="127.0.0.1", help="address the master listens on")
    deploy.add_cluster_flags(p)
    deploy.add_master_flags(p)
    deploy_flags.add_master_name_flag(p)
    deploy_flags.add_process_flags(p)
    deploy_flags.add_master_setting_flags(p)
    p.set_defaults(func=master_up)

    p = verbs.add_parser("master-down", help="stop the local master (its agents keep waiting)")
    deploy.add_cluster_flags(p)
    deploy_flags.add_master_name_flag(p)
    deploy.add_delete_db_flag(p, "after stopping it")
    p.set_defaults(func=master_down)

    p = verbs.add_parser("agent-up", help="start a local agent of a master")
    p.add_argument("master_host", metavar="MASTER_HOST", help="the master's host name or address")
    p.add_argument("--master-port", type=deploy.count_arg(1, 65535), default=8080, metavar="P")
    p.add_argument(
        "--agent-name", default=None, metavar="NAME", help=f"its id (default: {DEFAULT_AGENT})"
    )
    p.add_argument("--agent-resource-pool", default=None, metavar="POOL", help="the pool it joins")
    p.add_argument(
        "--agent-config-path",
        type=Path,
        default=None,
        metavar="FILE",
        help="YAML agent config (det-agent --config-file); flags win over it",
    )
    p.add_argument("--slots", type=deploy.count_arg(1), metavar="M", help="artificial slots")
    p.add_argument("--runtime", choices=("process", "docker"), default="process")
    deploy.add_gpu_flags(p)
    deploy.add_cluster_flags(p)
    deploy_flags.add_process_flags(p)
    p.set_defaults(func=agent_up)

    p = verbs.add_parser("agent-down", help="stop a local agent (or --all)")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--agent-name", default=None, metavar="NAME", help="the agent's id")
    which.add_argument("--all", action="store_true", help="every agent of the cluster")
    deploy.add_cluster_flags(p)
    p.set_defaults(func=agent_down)

    p = verbs.add_parser("logs", help="print the local master's log, following it")
    p.add_argument("--no-follow", action="store_true", help="print what is there and stop")
    deploy.add_cluster_flags(p)
    p.set_defaults(func=logs)


def _state(data_dir: Path) -> ClusterState | None:
    state = local_cluster.read_state(data_dir)
    if state is None:
        return None
    # Forget what has exited meanwhile.
    master = state.master if state.master and local_cluster.alive(state.master) else None
    agents = [a for a in state.agents if local_cluster.alive(a)]
    return ClusterState(state.port, master, agents)


def master_up(args: argparse.Namespace) -> int:
    deploy_flags.check(args)
    data_dir = deploy.data_dir_of(args)
    old = _state(data_dir)
    if old is not None and old.master is not None and deploy.healthy(old.port):
        print(f"A local master is already running at http://localhost:{old.port}")
        return 0
    master = deploy.prepare_master(args, data_dir)
    if args.delete_db:
        deploy.delete_db(master)
    if not args.no_preflight_checks and deploy.port_in_use(master.port):
        raise errors.FailedPrecondition(
            f"port {master.port} is in use; choose another with --master-port"
        )
    data_dir.mkdir(parents=True, exist_ok=True)
    started: list[Proc] = []
    up = argparse.Namespace(**vars(args), agents=0, slots=None, runtime="process")
    up.default_image = None
    try:
        deploy.start_and_wait(up, data_dir, started, master)
    except BaseException:
        local_cluster.stop(started)
        raise
    waiting = old.agents if old is not None else []
    local_cluster.write_state(data_dir, ClusterState(master.port, started[0], waiting))
    if args.initial_user_password is not None:
        deploy.set_initial_password(master.port, master, args.initial_user_password)
    if args.no_wait_for_master:
        print(f"Started a master at http://localhost:{master.port}, not waiting for it")
    else:
        print(f"Master at http://localhost:{master.port} (DET_MASTER=localhost:{master.port})")
    print(f"Its name is {started[0].name}; the {deploy.ADMIN} password is in")
    print(f"{master.admin_password_file}")
    return 0


def master_down(args: argparse.Namespace) -> int:
    data_dir = deploy.data_dir_of(args)
    state = _state(data_dir)
    if state is None or state.master is None:
        print(f"No local master is running in {data_dir}")
    elif args.master_name is not None and args.master_name != state.master.name:
        raise errors.NotFound(
            f"no local master named {args.master_name!r} runs in {data_dir} (its master is "
            f"{state.master.name!r})"
        )
    else:
        for p in local_cluster.stop([state.master]):
            print(f"the master (pid {p.pid}) did not stop within 15 s and was killed")
        local_cluster.write_state(data_dir, ClusterState(state.port, None, state.agents))
        print(f"Stopped the local master {state.master.name}")
    if args.delete_db:
        deploy.delete_db(local_config.recorded(data_dir))
        print(f"Removed the master's store in {data_dir / 'master'}")
    return 0


def _agent_name(args: argparse.Namespace, taken: set[str]) -> str:
    if args.agent_name:
        if args.agent_name in taken:
            raise errors.FailedPrecondition(
                f"agent {args.agent_name} is already running; stop it with det deploy local "
                f"agent-down --agent-name {args.agent_name}"
            )
        return str(args.agent_name)
    n = 1
    while (name := DEFAULT_AGENT if n == 1 else f"{DEFAULT_AGENT}-{n}") in taken:
        n += 1
    return name


def agent_up(args: argparse.Namespace) -> int:
    deploy_flags.check(args)
    data_dir = deploy.data_dir_of(args)
    state = _state(data_dir) or ClusterState(args.master_port, None, [])
    master = local_config.recorded(data_dir)
    if not master.agent_token_file.is_file():
        raise errors.FailedPrecondition(
            f"no agent token at {master.agent_token_file}: agent-up joins a master this "
            "cluster started (det deploy local master-up, or give its --data-dir / "
            "--cluster-name)"
        )
    config_file = args.agent_config_path
    if config_file is not None:
        config_file = config_file.expanduser().resolve()
        if not config_file.is_file():
            raise errors.InvalidArgument(f"--agent-config-path {config_file}: no such file")
    name = _agent_name(args, {a.name for a in state.agents})
    work_dir = data_dir / f"agent-{name}"
    work_dir.mkdir(parents=True, exist_ok=True)
    argv = deploy.agent_argv(
        args.master_port,
        name,
        work_dir,
        args.slots if args.slots is not None or args.gpu else 1,
        args.runtime,
        token_file=master.agent_token_file,
        resource_pool=args.agent_resource_pool or (None if config_file else master.resource_pool),
        master_host=args.master_host,
        config_file=config_file,
    )
    agent = local_cluster.start(name, argv, data_dir / f"agent-{name}.log", data_dir)
    local_cluster.write_state(
        data_dir, ClusterState(state.port, state.master, [*state.agents, agent])
    )
    address = f"{args.master_host}:{args.master_port}"
    try:
        asyncio.run(_wait_connected(address, agent, master.admin_password_file))
    except BaseException:
        local_cluster.stop([agent])
        local_cluster.write_state(data_dir, ClusterState(state.port, state.master, state.agents))
        raise
    print(f"Agent {name} is connected to the master at {address}")
    return 0


async def _wait_connected(address: str, agent: Proc, password_file: Path) -> None:
    deadline = time.monotonic() + deploy.READY_TIMEOUT
    async with client.session(address) as s:
        try:
            await auth.login(s, deploy.ADMIN, password_file.read_text().strip(), active=False)
        except (OSError, errors.DetError):
            # Not our master's admin: the agent is up once it has run a while without exiting.
            await asyncio.sleep(2)
            deploy.check_alive(agent)
            return
        while True:
            deploy.check_alive(agent)
            found = await s.call(s.stub.get_agents(v1.GetAgentsRequest()))
            if any(a.id == agent.name and a.connected for a in found.agents):
                return
            if time.monotonic() > deadline:
                deploy.fail(agent, f"did not connect to the master at {address}")
            await asyncio.sleep(0.2)


def agent_down(args: argparse.Namespace) -> int:
    data_dir = deploy.data_dir_of(args)
    state = _state(data_dir)
    if not (args.all or args.agent_name):
        raise errors.InvalidArgument("give the agent with --agent-name NAME, or --all")
    agents = state.agents if state is not None else []
    doomed = agents if args.all else [a for a in agents if a.name == args.agent_name]
    if not doomed:
        if args.all:
            print("No local agent is running")
            return 0
        running = ", ".join(a.name for a in agents) or "none"
        raise errors.NotFound(f"agent {args.agent_name} is not running here (running: {running})")
    for p in local_cluster.stop(doomed):
        print(f"agent {p.name} (pid {p.pid}) did not stop within 15 s and was killed")
    assert state is not None
    kept = [a for a in agents if a not in doomed]
    local_cluster.write_state(data_dir, ClusterState(state.port, state.master, kept))
    print(f"Stopped {len(doomed)} agent(s): {', '.join(a.name for a in doomed)}")
    return 0


def logs(args: argparse.Namespace) -> int:
    path = deploy.data_dir_of(args) / "master.log"
    try:
        f = path.open(errors="replace")
    except FileNotFoundError:
        raise errors.NotFound(
            f"no local master log at {path} (det deploy local master-up)"
        ) from None
    with f:
        sys.stdout.write(f.read())
        sys.stdout.flush()
        while not args.no_follow:
            line = f.readline()
            if line:
                sys.stdout.write(line)
                sys.stdout.flush()
            else:
                time.sleep(0.2)
    return 0
