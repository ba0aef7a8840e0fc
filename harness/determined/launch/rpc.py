"""The launch layers' calls to the master, retried while the master cannot be reached.

A task can start while its master restarts or while the network settles, so connection
failures are retried with backoff for up to ``RETRY_SECONDS``; any other error (an unknown
experiment, a bad token) fails at once. Calls carry the task's ``DET_SESSION_TOKEN``.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from typing import Any

from determined import ClusterInfo
from determined.api import lite as v1
from determined.common import client, errors

log = logging.getLogger(__name__)

RETRY_SECONDS = 30.0
CONTEXT_TIMEOUT_SECONDS = 300.0
_FIRST_DELAY = 0.25
_MAX_DELAY = 4.0


def _call(
    info: ClusterInfo, request: Callable[[v1.Stub], Any], *, what: str, retry_seconds: float
) -> Any:
    deadline = time.monotonic() + retry_seconds
    delay = _FIRST_DELAY
    md = client.metadata(info.session_token)
    while True:
        # A fresh channel per attempt: a refused connection must not be remembered.
        channel = client.blocking_channel(info.master_url, cert_file=info.master_cert_file)
        try:
            return request(v1.stub(channel.unary, metadata=md))
        except Exception as e:
            translated = client.translate(e, info.master_url)
            if translated is None:
                raise
            if not isinstance(translated, errors.Unavailable):
                raise translated from None
            if time.monotonic() + delay > deadline:
                raise errors.Unavailable(
                    f"{what}: gave up after {retry_seconds:.0f} s: {translated.message}"
                ) from None
            log.warning("%s: %s; retrying in %.1f s", what, translated.message, delay)
        finally:
            channel.close()
        time.sleep(delay)
        delay = min(delay * 2, _MAX_DELAY)


def fetch_context(
    info: ClusterInfo, experiment_id: int, *, retry_seconds: float = RETRY_SECONDS
) -> bytes:
    """The experiment's packed context (``GetExperimentContext``).

    Raises:
        determined.common.errors.DetError: the master refused, or stayed unreachable.
    """
    message = v1.GetExperimentContextRequest(experiment_id=experiment_id)

    def request(stub: v1.Stub) -> Any:
        return stub.get_experiment_context(message, timeout=CONTEXT_TIMEOUT_SECONDS)

    response = _call(info, request, what="downloading the context", retry_seconds=retry_seconds)
    return bytes(response.context)


def fetch_task_context(info: ClusterInfo, *, retry_seconds: float = RETRY_SECONDS) -> bytes:
    """The context a command, notebook or shell was launched with (``GetTaskContext``).

    Raises:
        determined.common.errors.DetError: the master refused, or stayed unreachable.
    """
    message = v1.GetTaskContextRequest(task_id=info.task_id)

    def request(stub: v1.Stub) -> Any:
        return stub.get_task_context(message, timeout=CONTEXT_TIMEOUT_SECONDS)

    response = _call(info, request, what="downloading the context", retry_seconds=retry_seconds)
    return bytes(response.context)


def all_gather(
    info: ClusterInfo,
    data: bytes,
    *,
    group: str,
    seq: int = 0,
    timeout_seconds: float = 0.0,
    retry_seconds: float = RETRY_SECONDS,
) -> list[bytes]:
    """Every container's ``data``, in container-rank order (``AllocationAllGather``).

    Each of the allocation's containers must call it with the same ``group`` and ``seq``;
    the call returns once all of them have. ``timeout_seconds`` 0 leaves the wait to the
    master's default.

    Raises:
        determined.common.errors.DetError: the master refused, timed out, or stayed
            unreachable.
    """
    message = v1.AllGatherRequest(
        allocation_id=info.allocation_id,
        group=group,
        seq=seq,
        rank=info.container_rank,
        size=len(info.container_addrs),
        data=data,
        timeout_seconds=timeout_seconds,
        request_id=os.urandom(16).hex(),  # not uuid: its import is a launcher's 5 ms
    )

    def request(stub: v1.Stub) -> Any:
        return stub.allocation_all_gather(message)

    response = _call(info, request, what="exchanging rendezvous data", retry_seconds=retry_seconds)
    return [bytes(d) for d in response.data]


def mark_resources_daemon(info: ClusterInfo, *, retry_seconds: float = RETRY_SECONDS) -> None:
    """Tell the master that this container only serves the others (an sshd, say).

    Once every other container of the allocation has exited, the master stops this one
    (SIGTERM, then SIGKILL after its grace period), and how it exits is not held against the
    task. A launcher calls it from each non-chief container that starts no work of its own
    (``MarkAllocationResourcesDaemon``).

    Raises:
        determined.common.errors.DetError: no ``DET_RESOURCES_ID`` in this container, the
            master refused (the allocation ended, say), or stayed unreachable.
    """
    if not info.resources_id:
        raise errors.FailedPrecondition(
            "DET_RESOURCES_ID is not set: this container cannot name itself to the master"
        )
    message = v1.MarkAllocationResourcesDaemonRequest(
        allocation_id=info.allocation_id, resources_id=info.resources_id
    )

    def request(stub: v1.Stub) -> Any:
        return stub.mark_allocation_resources_daemon(message)

    _call(info, request, what="marking this container a daemon", retry_seconds=retry_seconds)
