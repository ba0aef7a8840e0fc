"""The master's elastic pools: one provisioner for each pool with a ``provider``, built
at start and run beside the task manager until the master stops."""

from __future__ import annotations

import asyncio
import pathlib
from collections.abc import Sequence

from determined.api.gen import v1
from pydet.master.agents.table import AgentTable
from pydet.master.provisioner.aws import AwsProvider
from pydet.master.provisioner.command import CommandProvider
from pydet.master.provisioner.provider import AgentSetup, Provider, master_address
from pydet.master.provisioner.provisioner import Provisioner
from pydet.master.provisioner.settings import ProviderSettings
from pydet.master.tasks.task_list import TaskList


class ElasticPools:
    def __init__(self, provisioners: Sequence[Provisioner] = ()) -> None:
        self.provisioners = list(provisioners)

    @classmethod
    def build(
        cls,
        pools: Sequence[tuple[str, ProviderSettings]],
        *,
        agents: AgentTable,
        tasks: TaskList,
        cluster_id: str,
        master_url: str,
        agent_token: str,
        master_cert: pathlib.Path | None,
    ) -> ElasticPools:
        """``master_url``: the address tasks reach the master at, for pools whose provider
        names none; ``master_cert``: the master's TLS certificate chain, given to agents as
        their CA (None without TLS)."""
        ca = master_cert.read_text() if master_cert is not None else ""
        out = []
        for name, settings in pools:
            provider: Provider
            if settings.aws is not None:
                provider = AwsProvider(settings.aws, pool=name, cluster_id=cluster_id)
            else:
                assert settings.command is not None
                provider = CommandProvider(settings.command, pool=name)
            setup = AgentSetup(
                master=master_address(settings.master_url or master_url),
                token=agent_token,
                ca_cert=ca,
            )
            out.append(Provisioner(name, settings, provider, agents, tasks, setup))
        return cls(out)

    async def run(self) -> None:
        if not self.provisioners:
            return
        async with asyncio.TaskGroup() as tg:
            for p in self.provisioners:
                tg.create_task(p.run())

    def instances(self) -> list[v1.Instance]:
        return [i for p in self.provisioners for i in p.instances()]

    def summaries(self) -> list[v1.ProvisionerStatus]:
        return [p.summary() for p in self.provisioners]
