"""The agent's one long-lived stream to the master (``Agents.Connect``), kept up forever.

Each session: open the stream, send the hello (slots and still-running containers), wait
for the welcome, send again the exits that were sent but never acknowledged, then send
the outbox (started / logs / exited) while handing the master's orders to ``on_order``.
When the stream breaks, containers keep running and their events wait in the outbox;
the connection retries with exponential backoff and logs one line per outage, not one
per attempt.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
import time
from collections.abc import Callable

import grpclib.client
import grpclib.config
import grpclib.const
import grpclib.exceptions

from determined.api.gen import v1
from determined.common import client, errors
from pydet.agent import wire
from pydet.agent.outbox import Outbox
from pydet.agent.runtime import Order

log = logging.getLogger(__name__)

CONNECT_PATH = "/v1.Agents/Connect"
MIN_BACKOFF = 0.2
MAX_BACKOFF = 5.0
WELCOME_TIMEOUT = 30.0
# On close: how long to wait for the master to acknowledge the last exits.
ACK_TIMEOUT = 2.0

# HTTP/2 pings find a master that vanished without closing the connection (power loss,
# network partition): no ack within the timeout closes it and the agent reconnects.
_CHANNEL_CONFIG = grpclib.config.Configuration(
    _keepalive_time=10.0,
    _keepalive_timeout=20.0,
    _http2_max_pings_without_data=0,
    _http2_min_sent_ping_interval_without_data=10.0,
)


def open_stream(
    channel: grpclib.client.Channel, metadata: dict[str, str]
) -> grpclib.client.Stream[v1.AgentMessage, v1.MasterMessage]:
    """The agent's stream to the master (Agents/Connect), to enter with ``async with``."""
    return channel.request(
        CONNECT_PATH,
        grpclib.const.Cardinality.STREAM_STREAM,
        v1.AgentMessage,
        v1.MasterMessage,
        metadata=metadata,
    )


class StreamEnded(Exception):
    """The master ended the stream without an error status."""


class ProtocolViolation(Exception):
    """The master broke the agent protocol (e.g. its first message was no welcome)."""


# A clock this far off the master's is worth a warning (the master says so too).
MAX_CLOCK_SKEW = 5.0


class AgentRefused(Exception):
    """The master refused this agent's credentials: retrying cannot help."""


class Connection:
    def __init__(
        self,
        *,
        master: str,
        agent_id: str,
        hello: Callable[[], v1.AgentMessage],
        outbox: Outbox,
        on_order: Callable[[Order], None],
        token: str = "",
        master_cert_file: str | None = None,
        min_backoff: float = MIN_BACKOFF,
        max_backoff: float = MAX_BACKOFF,
        welcome_timeout: float = WELCOME_TIMEOUT,
        ack_timeout: float = ACK_TIMEOUT,
    ) -> None:
        self._master = master
        client.parse_address(master)  # fail fast on a bad address
        # None: DET_MASTER_CERT_FILE if set (see determined.common.client).
        self._cert_file = master_cert_file
        self._agent_id = agent_id
        self._metadata = client.metadata(token)
        self._hello = hello
        self._outbox = outbox
        self._on_order = on_order
        self._min_backoff = min_backoff
        self._max_backoff = max_backoff
        self._welcome_timeout = welcome_timeout
        self._ack_timeout = ack_timeout
        self._closing = asyncio.Event()
        self._finished = asyncio.Event()
        self._connected = False
        self._ever_connected = False
        self._outage_since: float | None = None
        self._outage_reason: str | None = None
        self.cluster_id = ""

    @property
    def connected(self) -> bool:
        """Whether a session is up (the master welcomed this agent)."""
        return self._connected

    async def run(self) -> None:
        """Keep a session up until ``close``."""
        backoff = self._min_backoff
        try:
            while not self._closing.is_set():
                welcomed = False
                try:
                    welcomed = await self._session()
                    reason = "the master ended the stream"
                    refused = False
                except grpclib.exceptions.GRPCError as e:
                    if e.status in (
                        grpclib.const.Status.UNAUTHENTICATED,
                        grpclib.const.Status.PERMISSION_DENIED,
                    ):
                        raise AgentRefused(
                            f"the master at {self._master} refused this agent: {e.message}"
                        ) from None
                    welcomed = welcomed or self._connected
                    reason = self._describe(e)
                    refused = True
                except Exception as e:
                    welcomed = welcomed or self._connected
                    reason = self._describe(e)
                    refused = isinstance(
                        e, (grpclib.exceptions.GRPCError, ProtocolViolation)
                    ) or client.is_tls_failure(e)
                finally:
                    self._connected = False
                if self._closing.is_set():
                    break
                if welcomed:
                    backoff = self._min_backoff
                self._note_outage(reason, refused=refused)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(backoff):
                        await self._closing.wait()
                backoff = min(backoff * 2, self._max_backoff)
        finally:
            self._finished.set()

    async def close(self, *, timeout: float = 5.0) -> bool:
        """Flush what is queued (when connected), end the stream and stop reconnecting.

        Returns whether ``run`` finished within ``timeout``; the caller owns ``run``'s task
        and cancels it otherwise.
        """
        self._closing.set()
        self._outbox.wake()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._finished.wait()
        return self._finished.is_set()

    async def _session(self) -> bool:
        # Afresh for each session: a renewed CA file is read at the next reconnect.
        channel = client.open_channel(
            self._master, cert_file=self._cert_file, config=_CHANNEL_CONFIG
        )
        try:
            async with open_stream(channel, self._metadata) as stream:
                await stream.send_message(self._hello())
                async with asyncio.timeout(self._welcome_timeout):
                    first = await stream.recv_message()
                if first is None:
                    await _finish(stream)
                if first is None or first.welcome is None:
                    raise ProtocolViolation("the master's first message was not a welcome")
                self._welcomed(first.welcome)
                try:
                    async with asyncio.TaskGroup() as tg:
                        tg.create_task(self._send_loop(stream))
                        tg.create_task(self._recv_loop(stream))
                except ExceptionGroup as group:
                    error = _first_error(group)
                    if isinstance(error, StreamEnded):
                        await _finish(stream)
                    raise error from None
            return True
        finally:
            channel.close()

    def _welcomed(self, welcome: v1.Welcome) -> None:
        self._connected = True
        self.cluster_id = welcome.cluster_id
        skew = time.time() - welcome.clock if welcome.clock else 0.0
        if abs(skew) > MAX_CLOCK_SKEW:
            log.warning(
                "this host's clock is %.0f s %s the master's: log times and timeouts will be "
                "off; synchronize it (NTP)",
                abs(skew),
                "ahead of" if skew > 0 else "behind",
            )
        waited = (
            f" after {time.monotonic() - self._outage_since:.1f} s"
            if self._outage_since is not None
            else ""
        )
        if not self._ever_connected:
            log.info(
                "connected to the master at %s%s (cluster %s, master version %s) as agent %s",
                self._master,
                waited,
                welcome.cluster_id or "?",
                welcome.master_version or "?",
                self._agent_id,
            )
        elif self._outage_since is not None:
            log.info(
                "reconnected to the master at %s%s; sending %d buffered log line(s) and "
                "%d unacknowledged exit(s)",
                self._master,
                waited,
                self._outbox.line_count,
                self._outbox.unacked_count,
            )
        self._ever_connected = True
        self._outage_since = None
        self._outage_reason = None

    def _note_outage(self, reason: str, *, refused: bool) -> None:
        """Log an outage once when it starts; again only when the master refuses this agent
        for a new reason (a refusal needs a person; an unreachable master just takes time)."""
        if self._outage_since is None:
            self._outage_since = time.monotonic()
            if self._ever_connected:
                log.warning(
                    "lost the master: %s; containers keep running and their output is "
                    "buffered; reconnecting (retrying every %g s at most)",
                    reason,
                    self._max_backoff,
                )
            else:
                log.warning("%s; retrying (every %g s at most)", reason, self._max_backoff)
        elif refused and reason != self._outage_reason:
            log.warning("still not connected: %s", reason)
        self._outage_reason = reason

    def _describe(self, e: Exception) -> str:
        if isinstance(e, grpclib.exceptions.GRPCError):
            detail = e.message or "no details"
            if e.status is grpclib.const.Status.ALREADY_EXISTS:
                return (
                    f"the master refused agent id {self._agent_id!r}: {detail} (another agent "
                    "with this id is connected; retrying in case its connection is stale)"
                )
            if e.status is grpclib.const.Status.UNAVAILABLE:
                return f"the master at {self._master} is unavailable: {detail}"
            return f"the master rejected this agent: {e.status.name}: {detail}"
        if isinstance(e, ssl.SSLCertVerificationError):
            return (
                f"cannot verify the master's certificate at {self._master} "
                f"({e.verify_message or e.reason}): set --master-cert-file (or "
                f"{client.CERT_FILE_ENV}) to the CA certificate that signed it"
            )
        if client.is_tls_failure(e):
            translated = client.translate(e, self._master)
            assert translated is not None
            return translated.message
        dropped = (grpclib.exceptions.StreamTerminatedError, ConnectionResetError)
        if isinstance(e, dropped) and not self._connected:
            if not client.uses_tls(self._master, self._cert_file):
                # A plain client's first bytes end a TLS master's handshake: it just hangs up.
                return (
                    f"the master at {self._master} hung up before welcoming this agent; "
                    "if it serves TLS, give --master https://HOST:PORT and --master-cert-file"
                )
        if isinstance(e, grpclib.exceptions.StreamTerminatedError):
            return f"the connection to the master at {self._master} broke ({e})"
        if isinstance(e, socket.gaierror):
            host = client.parse_address(self._master)[0]
            return (
                f"cannot resolve the master's name {host} ({e.strerror or e}): check --master "
                "(or DET_MASTER)"
            )
        if isinstance(e, OSError):
            return f"cannot reach the master at {self._master} ({e.strerror or e})"
        if isinstance(e, TimeoutError):
            return f"the master at {self._master} sent no welcome in {self._welcome_timeout} s"
        if isinstance(e, (StreamEnded, ProtocolViolation)):
            return str(e)
        if isinstance(e, errors.DetError):
            return e.message  # e.g. a CA file that cannot be read any more
        if isinstance(e, grpclib.exceptions.ProtocolError):
            return f"HTTP/2 protocol error talking to the master at {self._master}: {e}"
        log.error("unexpected error in the connection to the master", exc_info=e)
        return f"unexpected error: {e.__class__.__name__}: {e}"

    async def _send_loop(self, stream: _Stream) -> None:
        for exited in self._outbox.unacked_sent():
            await stream.send_message(v1.AgentMessage(exited=wire.exited(exited)))
        while True:
            batch = await self._outbox.take()
            if batch is None:
                break
            try:
                await stream.send_message(wire.event_message(batch.item))
            except BaseException:
                self._outbox.restore(batch)
                raise
            self._outbox.commit(batch)
        # Closing: everything was sent; let the master acknowledge the last exits.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self._ack_timeout):
                await self._outbox.wait_all_acked()
        await stream.end()

    async def _recv_loop(self, stream: _Stream) -> None:
        while True:
            msg = await stream.recv_message()
            if msg is None:
                raise StreamEnded("the master ended the stream")
            if msg.exit_acknowledged is not None:
                self._outbox.ack(msg.exit_acknowledged.container_id)
                continue
            order = wire.order(msg)
            if order is not None:
                self._on_order(order)
            elif msg.welcome is None:
                log.warning("ignoring a message from the master that this agent does not know")


_Stream = grpclib.client.Stream[v1.AgentMessage, v1.MasterMessage]


async def _finish(stream: _Stream) -> None:
    """After the master ended its side: raise its error status, if it sent one."""
    try:
        async with asyncio.timeout(1.0):
            with contextlib.suppress(grpclib.exceptions.ProtocolError):
                await stream.end()
            await stream.recv_trailing_metadata()
    except grpclib.exceptions.GRPCError:
        raise
    except Exception:
        return


def _first_error(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The error that broke the session (TaskGroup wraps it with its siblings')."""
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            return _first_error(exc)
        return exc
    return group
