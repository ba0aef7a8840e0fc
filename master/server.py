"""The master process: wires the store, agents, tasks, experiments and both transports
together, runs them, and shuts them down in order."""

from __future__ import annotations

import asyncio
import logging
import pathlib
import ssl
import uuid

import grpclib.config
import grpclib.server

from determined.common import errors, private_dirs, wire
from pydet.master import config as master_config
from pydet.master import gateway, scheduler
from pydet.master.agents.hub import AgentHub
from pydet.master.agents.table import AgentTable
from pydet.master.api import DeterminedServicer
from pydet.master.auth import authenticator as auth
from pydet.master.auth import rules as authz
from pydet.master.auth.access import Access
from pydet.master.auth.task_tokens import LiveTaskTokens
from pydet.master.cluster.messages import ClusterMessages
from pydet.master.cluster.policies import ConfigPolicies
from pydet.master.commands.commands import Commands
from pydet.master.commands.launcher import Launcher
from pydet.master.events import EventBus
from pydet.master.experiments.checkpoints import Checkpoints
from pydet.master.experiments.experiment_store import ExperimentStore
from pydet.master.experiments.gc_policy import GcPolicies
from pydet.master.experiments.live import LiveExperiments
from pydet.master.experiments.log_policies import LogPolicyWatch
from pydet.master.experiments.manager import Experiments
from pydet.master.experiments.reports import Reports
from pydet.master.experiments.templates import Templates
from pydet.master.guard import Guarded
from pydet.master.jobs.queue import Jobs
from pydet.master.listener import Limits, Listener, bind, raise_fd_limit, server_tls_context
from pydet.master.logs import retention as log_retention
from pydet.master.logs.log_store import LogStore
from pydet.master.logs.master_log import MasterLog
from pydet.master.models.registry import Registry
from pydet.master.provisioner.pools import ElasticPools
from pydet.master.service import Service
from pydet.master.slurm.pool import SlurmPool
from pydet.master.store.db import Database
from pydet.master.tasks.generic import GenericTasks
from pydet.master.tasks.manager import TaskManager
from pydet.master.tasks.task_list import TaskList
from pydet.master.tasks.task_owners import TaskOwners
from pydet.master.tasks.task_spec import MasterInfo
from pydet.master.tasks.tensorboards import Tensorboards
from pydet.master.users.profiles import Profiles
from pydet.master.webhooks.dispatch import Webhooks
from pydet.master.webhooks.sender import Sender
from pydet.master.webhooks.store import WebhookStore
from pydet.master.workspaces.organization import Organization

log = logging.getLogger(__name__)

# HTTP/2 pings on every connection with calls in flight: an agent (or task) whose host went
# silent without closing its connection (power loss, a cut cable) is dropped within 20 s, and
# its containers are declared lost after agent_reconnect_timeout more. Without them the master
# waits for TCP to give up, minutes later.
KEEPALIVE = grpclib.config.Configuration(
    _keepalive_time=10.0,
    _keepalive_timeout=10.0,
    # Keep pinging a connection that only receives (an agent's stream carries few orders).
    _http2_max_pings_without_data=0,
    _http2_min_sent_ping_interval_without_data=10.0,
)

VERSION = "0.1.0"


def _private_data_dir(data_dir: pathlib.Path) -> None:
    """The data directory (the store, password hashes, tokens, configs with storage keys)
    is the master's user's alone: 0700, its files 0600, existing ones tightened."""
    try:
        tightened = private_dirs.make_private(data_dir)
    except private_dirs.SharedDirectory as e:
        raise errors.FailedPrecondition(f"data_dir: {e}") from None
    if tightened:
        log.warning(
            "made the data directory's %s readable by its owner alone (they were open to "
            "other users)",
            ", ".join(tightened),
        )


class Master:
    def __init__(self, cfg: master_config.MasterConfig) -> None:
        self.cfg = cfg
        self.db = Database(cfg.db_path, cfg.db)
        self._listener: Listener | None = None
        self._tls: ssl.SSLContext | None = None
        self._stopping = asyncio.Event()
        self.port = cfg.port
        self.ready = asyncio.Event()
        # The master's own log for `det master logs`, from its first line to its last.
        self.log = MasterLog()

    async def _cluster_id(self) -> str:
        row = await self.db.fetch_one("SELECT value FROM cluster WHERE key = 'cluster_id'")
        if row is not None:
            return str(row["value"])
        cluster_id = str(uuid.uuid4())
        await self.db.execute(
            "INSERT INTO cluster (key, value) VALUES ('cluster_id', ?)", (cluster_id,)
        )
        return cluster_id

    async def run(self) -> None:
        root = logging.getLogger()
        root.addHandler(self.log)
        try:
            await self._run()
        finally:
            root.removeHandler(self.log)

    async def _run(self) -> None:
        tls = self.cfg.security.tls
        # Before anything else: a bad certificate or key stops the start with its reason.
        self._tls = server_tls_context(tls.cert, tls.key) if tls is not None else None
        raise_fd_limit()
        sock = bind(self.cfg.host, self.cfg.port)
        _private_data_dir(self.cfg.data_dir)
        await self.db.open()
        try:
            await self._serve(sock)
        finally:
            await self.db.close()

    async def _serve(self, sock: object) -> None:
        import socket

        assert isinstance(sock, socket.socket)
        cluster_id = await self._cluster_id()
        lock = asyncio.Lock()
        agents = AgentTable()
        events = EventBus()
        logs = LogStore(self.db, events)
        task_list = TaskList(self.db, agents, logs)
        info = MasterInfo(
            cluster_id=cluster_id,
            master_address=self.cfg.address_for_tasks(),
            pools=tuple(p.name for p in self.cfg.resource_pools),
            default_pool=self.cfg.default_resource_pool,
            defaults={
                "checkpoint_storage": self.cfg.storage(),
                "resources": {"resource_pool": self.cfg.default_resource_pool},
            },
            task_defaults=self.cfg.task_defaults(),
        )
        checkpoints = Checkpoints(self.db)
        store = ExperimentStore(self.db, events)
        live = LiveExperiments()
        experiments = Experiments(self.db, store, live, task_list, checkpoints, info)
        logs.watch(LogPolicyWatch(live, task_list, store).observe)
        generic = GenericTasks(self.db, task_list, logs, info)
        tensorboards = Tensorboards(self.db, generic, info)
        organization = Organization(self.db, info.pools, info.default_pool)
        commands = Commands(generic, Launcher(info, organization.bindings), organization)
        tasks = TaskManager(
            self.db,
            agents,
            task_list,
            TaskOwners(experiments, generic, self.db),
            logs,
            lock,
            pools={p.name: scheduler.PoolPolicy.of(p) for p in self.cfg.resource_pools},
            agent_reconnect_timeout=self.cfg.agent_reconnect_timeout,
        )
        hub = AgentHub(agents, tasks, cluster_id=cluster_id, version=VERSION)
        slurm_reasons: dict[str, str] = {}
        slurm_pools = [
            SlurmPool(p.slurm, agents, tasks, self.db, reasons=slurm_reasons)
            for p in self.cfg.resource_pools
            if p.slurm is not None
        ]
        for pool in slurm_pools:
            await pool.register()
        agent_token = auth.load_or_create_agent_token(self.cfg.agent_token_path)
        tls = self.cfg.security.tls
        elastic = ElasticPools.build(
            [(p.name, p.provider) for p in self.cfg.resource_pools if p.provider is not None],
            agents=agents,
            tasks=task_list,
            cluster_id=cluster_id,
            master_url=self.cfg.address_for_tasks(),
            agent_token=agent_token,
            master_cert=tls.cert if tls is not None else None,
        )
        reports = Reports(self.db, live, events)
        messages = ClusterMessages(self.db)
        await messages.load()
        signing_key = self.cfg.webhook_signing_key or auth.load_or_create_signing_key(
            self.cfg.webhook_signing_key_path
        )
        hooks = Webhooks(
            self.db, WebhookStore(self.db), events, Sender(signing_key=signing_key.encode())
        )
        service = Service(
            db=self.db,
            lock=lock,
            agents=agents,
            logs=logs,
            tasks=task_list,
            experiments=experiments,
            live=live,
            reports=reports,
            checkpoints=checkpoints,
            info=info,
            version=VERSION,
            events=events,
            jobs=Jobs(
                self.cfg.resource_pools,
                self.cfg.default_resource_pool,
                self.db,
                store,
                live,
                agents,
                task_list,
                notes=slurm_reasons,
                generic=generic,
            ),
            webhooks=hooks,
            templates=Templates(self.db),
            tensorboards=tensorboards,
            organization=organization,
            registry=Registry(self.db, organization.workspaces),
            messages=messages,
            policies=ConfigPolicies(self.db),
            gc_policies=GcPolicies(self.db, live, store, checkpoints),
            generic=generic,
            commands=commands,
            elastic=elastic,
        )
        authenticator = auth.Authenticator(
            self.db,
            tasks=LiveTaskTokens(task_list, live),
            agent_token=agent_token,
            session_lifetime=self.cfg.security.session_lifetime,
            token_lifespans=self.cfg.security.token,
        )
        await authenticator.bootstrap(self.cfg.data_dir)
        async with lock:
            await experiments.load()
            await generic.load()
            restored = await tasks.restore(
                lambda trial_id, task_id: (
                    generic.job_of(task_id) if trial_id is None else live.experiment_of(trial_id)
                )
            )
            await experiments.restore(restored)
            await generic.restore(restored)
        # Outside the lock: the pool reports to the task manager, which takes it.
        for pool in slurm_pools:
            await pool.adopt()
        lookup = authz.Lookup(self.db, authenticator.grants)
        servicer = DeterminedServicer(
            service,
            authenticator,
            Profiles(self.db, authenticator, lookup),
            Access(authenticator, lookup),
            master_log=self.log,
            master_config=master_config.printable(self.cfg),
            log_retention_days=self.cfg.log_retention_days,
        )
        grpc_server = grpclib.server.Server(
            [
                Guarded(servicer, authenticator, lookup),
                Guarded(hub, authenticator, lookup),
            ],
            codec=wire.WireCodec(),
            config=KEEPALIVE,
        )
        if self.cfg.webui_dir is not None:
            log.info("serving the WebUI from %s (a development build)", self.cfg.webui_dir)
        app = gateway.build(
            service,
            authenticator,
            lookup,
            session_lifetime=self.cfg.security.session_lifetime,
            webui_dir=self.cfg.webui_dir,
        )
        security = self.cfg.security
        self._listener = Listener(
            grpc_server,
            app,
            tls=self._tls,
            limits=Limits(
                per_address=security.max_connections_per_address,
                total=security.max_connections,
                first_request_timeout=security.first_request_timeout,
                idle_timeout=security.idle_connection_timeout,
            ),
        )
        await self._listener.start(sock)
        self.port = self._listener.port
        log.info(
            "master %s listening on %s:%d%s",
            cluster_id,
            self.cfg.host,
            self.port,
            " (TLS)" if self._tls is not None else "",
        )
        self.ready.set()
        try:
            async with asyncio.TaskGroup() as tg:
                scheduling = tg.create_task(tasks.run())
                delivering = tg.create_task(hooks.run())
                retaining = tg.create_task(log_retention.run(self.db, self.cfg.log_retention_days))
                bridges = [tg.create_task(pool.run()) for pool in slurm_pools]
                provisioning = tg.create_task(elastic.run())
                idling = tg.create_task(generic.run(lock))
                await self._stopping.wait()
                idling.cancel()
                provisioning.cancel()
                scheduling.cancel()
                delivering.cancel()
                retaining.cancel()
                for bridge in bridges:
                    bridge.cancel()
        finally:
            await self._listener.close()
            log.info("master stopped")

    def stop(self) -> None:
        self._stopping.set()
