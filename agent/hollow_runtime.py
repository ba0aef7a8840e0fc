"""The hollow runtime: plays each trial's calls to the master instead of running it.

A test and benchmark tool (as Kubernetes' kubemark is for its control plane): an agent on
this runtime can announce a thousand slots and take every start order the master sends
without starting a process. For a trial, it makes the calls the trial's Core API would make
over gRPC, with the order's own ``DET_*`` environment (its session token, trial and run
ids): it asks for the searcher operation, "trains" for ``work_seconds`` (a sleep, 0 by
default), reports one validation metric, completes the operation (whose reply names the
next one) and so on until the searcher has no more work for the trial, then exits 0
through the agent's normal path (``Started``, then ``Exited``). A task that is not a trial
exits 0 at once. A kill ends the play and reports exit code 143, as a process that obeyed
SIGTERM would.

The metric is a pure function of the trial's hyperparameters (the mean of the numeric ones,
else the trial id), so a search on hollow agents is reproducible.

Every trial of one runtime shares one HTTP/2 connection to the master; each call carries
that trial's own session token, so the master authorizes it as the task itself.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import determined as det
from determined.api.gen import v1
from determined.common import client
from pydet.agent.runtime import EventSink, Exited, RunningContainer, Started, StartOrder

if TYPE_CHECKING:
    import grpclib.client

log = logging.getLogger(__name__)

# What a process that handled SIGTERM and exited reports (128 + 15).
EXIT_KILLED = 143
EXIT_FAILED = 1
# A searcher that keeps extending a trial is bounded anyway: no real trial loops forever.
MAX_OPERATIONS = 1000
CALL_TIMEOUT = 120.0


@dataclass(eq=False)
class _Play:
    order: StartOrder
    on_event: EventSink
    task: asyncio.Task[None] | None = None
    killed: bool = False


class HollowRuntime:
    """Plays trials against the master; see the module docstring."""

    def __init__(
        self,
        *,
        master: str,
        agent_id: str,
        master_cert_file: str | None = None,
        work_seconds: float = 0.0,
    ) -> None:
        self._master = master
        self._agent_id = agent_id
        self._cert_file = master_cert_file
        self._work_seconds = work_seconds
        self._channel: grpclib.client.Channel | None = None
        self._plays: dict[str, _Play] = {}
        self._closed = False

    @property
    def name(self) -> str:
        return "hollow"

    async def start(self, order: StartOrder, on_event: EventSink) -> None:
        cid = order.container_id
        if cid in self._plays:
            log.warning("ignoring a second start order for container %s: it is running", cid)
            return
        if self._closed:
            error = "the agent is shutting down"
            on_event(Exited(cid, order.allocation_id, EXIT_FAILED, error, time.time()))
            return
        play = _Play(order, on_event)
        self._plays[cid] = play
        on_event(Started(cid, order.allocation_id, 0, time.time()))
        play.task = asyncio.create_task(self._run(play), name=f"hollow-{cid}")

    async def kill(self, container_id: str, grace_seconds: float) -> None:
        play = self._plays.get(container_id)
        if play is None or play.task is None:
            return
        play.killed = True
        play.task.cancel()
        await asyncio.gather(play.task, return_exceptions=True)

    def running(self) -> list[RunningContainer]:
        return [
            RunningContainer(p.order.container_id, p.order.allocation_id, 0)
            for p in self._plays.values()
        ]

    def lines_sent(self, container_id: str, timestamp: float) -> None:
        """Nothing to note: a hollow trial writes no output."""

    def kill_now(self) -> None:
        for play in self._plays.values():
            if play.task is not None:
                play.killed = True
                play.task.cancel()

    async def close(self) -> None:
        self._closed = True
        self.kill_now()
        tasks = [p.task for p in self._plays.values() if p.task is not None]
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._channel is not None:
            self._channel.close()
            self._channel = None

    async def _run(self, play: _Play) -> None:
        order = play.order
        code, error = 0, ""
        try:
            await self._play(order.env)
        except asyncio.CancelledError:
            if not play.killed:
                raise
            code = EXIT_KILLED
        except Exception as e:
            log.warning("hollow trial in container %s failed: %s", order.container_id, e)
            code, error = EXIT_FAILED, f"the hollow trial failed: {e}"
        finally:
            del self._plays[order.container_id]
            play.on_event(Exited(order.container_id, order.allocation_id, code, error, time.time()))

    async def _play(self, env: Mapping[str, str]) -> None:
        # The harness reads the task's environment; the hollow trial reads it the same way.
        info = det.ClusterInfo.from_env({**env, "DET_MASTER": self._master})
        if info is None or info.trial is None:
            return
        if self._channel is None:
            self._channel = client.open_channel(self._master, cert_file=self._cert_file)
        stub = v1.DeterminedStub(self._channel, metadata=client.metadata(info.session_token))
        trial = info.trial
        metric_name = str((trial.config.get("searcher") or {}).get("metric") or "validation_loss")
        value = hollow_metric(trial.hparams, trial.trial_id)
        # What SearcherContext.operations() asks first; later answers come with completions.
        current = await stub.get_current_searcher_operation(
            v1.GetCurrentSearcherOperationRequest(trial_id=trial.trial_id), timeout=CALL_TIMEOUT
        )
        for _ in range(MAX_OPERATIONS):
            if current.completed or current.op is None:
                return
            length = int(current.op.length)
            if self._work_seconds > 0:
                await asyncio.sleep(self._work_seconds)
            # What train.report_validation_metrics() ships (one report in a batch) ...
            report = v1.MetricReport(
                group="validation",
                steps_completed=length,
                metrics=json.dumps({metric_name: value}),
                timestamp=time.time(),
            )
            await stub.report_trial_metrics(
                v1.ReportTrialMetricsRequest(
                    trial_id=trial.trial_id, run_id=trial.trial_run_id, reports=[report]
                ),
                timeout=CALL_TIMEOUT,
            )
            # ... and what op.report_completed(metric) sends after it.
            done = await stub.complete_searcher_operation(
                v1.CompleteSearcherOperationRequest(
                    trial_id=trial.trial_id, length=length, searcher_metric=value
                ),
                timeout=CALL_TIMEOUT,
            )
            if done.next is None:
                raise RuntimeError("the master's completion reply has no next operation")
            current = done.next
        raise RuntimeError(f"the searcher asked for more than {MAX_OPERATIONS} operations")


def hollow_metric(hparams: Mapping[str, Any], trial_id: int) -> float:
    """The metric a hollow trial reports: the mean of its numeric hyperparameters."""
    numbers = [
        float(v)
        for v in hparams.values()
        if isinstance(v, (int, float)) and not isinstance(v, bool)
    ]
    return sum(numbers) / len(numbers) if numbers else float(trial_id)
