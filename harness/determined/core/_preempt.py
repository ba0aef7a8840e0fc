"""``core_context.preempt``: whether the task has been asked to stop (pause, preemption).

The chief learns of it from a long poll (``AllocationPreemptionSignal``) that runs on the
session's event loop from ``core.init()`` on, so ``should_preempt()`` reads a flag instead of
asking the master. A task that acknowledges the signal and exits 0 is resumed later from
its latest checkpoint instead of being marked completed.
"""

from __future__ import annotations

import enum
import logging
import threading
from typing import TYPE_CHECKING

from determined.common import errors
from determined.core._distributed import DistributedContext, DummyDistributedContext

if TYPE_CHECKING:
    from determined.core._rpc import MasterClient

log = logging.getLogger("determined.core")

LONG_POLL_SECONDS = 60.0
FIRST_POLL_SECONDS = 0.01
RETRY_DELAY_SECONDS = 10.0
# should_preempt() waits at most this long for the first answer of the master.
FIRST_ANSWER_TIMEOUT = 30.0


class PreemptMode(enum.Enum):
    """Who calls ``should_preempt()``.

    ``WorkersAskChief`` (default): every worker calls it together; the chief decides and all
    get the same answer, so all stop at the same step. ``ChiefOnly``: only the chief calls it.
    ``WorkersAskMaster``: every worker asks the master on its own (answers may differ for a
    moment between workers).
    """

    WorkersAskChief = "WORKERS_ASK_CHIEF"
    ChiefOnly = "CHIEF_ONLY"
    WorkersAskMaster = "WORKERS_ASK_MASTER"


class PreemptContext:
    """Tells the training loop when to save and exit because the task must stop."""

    def __init__(
        self,
        *,
        client: MasterClient,
        distributed: DistributedContext,
        preempt_mode: PreemptMode = PreemptMode.WorkersAskChief,
    ) -> None:
        self._client = client
        self._dist = distributed
        self._mode = PreemptMode(preempt_mode)
        self._preempted = threading.Event()
        self._answered = threading.Event()
        self._ack_sent = False
        self._watching = self._dist.rank == 0 or self._mode is PreemptMode.WorkersAskMaster
        if self._watching:
            client.session.spawn(self._watch, name="pydet-preemption-watcher")

    def should_preempt(self, auto_ack: bool = True) -> bool:
        """True when the task should save its state and exit.

        With ``auto_ack`` (default) the first ``True`` also acknowledges the signal, telling
        the master the task will stop and expects to be resumed. In the default
        ``WorkersAskChief`` mode every worker must call this together.
        """
        if self._mode is PreemptMode.ChiefOnly and self._dist.rank != 0:
            raise RuntimeError(
                "should_preempt() was called on rank "
                f"{self._dist.rank}, but preempt_mode=PreemptMode.ChiefOnly allows only the "
                "chief to call it; use PreemptMode.WorkersAskChief to ask on every worker"
            )
        out: bool | None = None
        if self._watching:
            if not self._answered.wait(FIRST_ANSWER_TIMEOUT):
                log.warning("no preemption answer from the master yet; assuming no preemption")
            out = self._preempted.is_set()
            if out and auto_ack and not self._ack_sent:
                self.acknowledge_preemption_signal()
        if self._mode is PreemptMode.WorkersAskChief:
            out = bool(self._dist.broadcast(out))
        assert out is not None
        return out

    def acknowledge_preemption_signal(self) -> None:
        """Tell the master the task is stopping because of the signal and should be resumed."""
        self._client.ack_preemption()
        self._ack_sent = True
        log.info("acknowledged the preemption signal")

    def _close(self) -> None:
        """The watcher is a task of the session and ends with it."""

    async def _watch(self) -> None:
        import asyncio  # only tasks on a cluster need it

        # A quick first answer, then long polls. Not 0: a master may read 0 as "its default".
        timeout = FIRST_POLL_SECONDS
        while True:
            try:
                preempt = await self._client.poll_preemption(timeout)
            except errors.DetError as e:
                log.warning(
                    "asking the master for the preemption signal failed (retrying in %.0fs): %s",
                    RETRY_DELAY_SECONDS,
                    e.message,
                )
                self._answered.set()
                await asyncio.sleep(RETRY_DELAY_SECONDS)
                continue
            self._answered.set()
            if preempt:
                log.info("the master asked this task to stop (preemption signal)")
                self._preempted.set()
                return
            timeout = LONG_POLL_SECONDS


class DummyPreemptContext(PreemptContext):
    """The off-cluster stand-in: ``should_preempt()`` is always False.

    It keeps the calling rules of the real one (in ``WorkersAskChief`` mode every worker
    takes part in the same broadcast).
    """

    def __init__(
        self,
        distributed: DistributedContext | None = None,
        preempt_mode: PreemptMode = PreemptMode.WorkersAskChief,
    ) -> None:
        self._dist = distributed or DummyDistributedContext()
        self._mode = PreemptMode(preempt_mode)
        self._preempted = threading.Event()
        self._answered = threading.Event()
        self._answered.set()
        self._ack_sent = False
        self._watching = self._dist.rank == 0 or self._mode is PreemptMode.WorkersAskMaster

    def acknowledge_preemption_signal(self) -> None:
        """Nothing to acknowledge off-cluster."""
