"""How every caller (CLI, harness, agent) reaches the master: one address, one channel.

``DET_MASTER`` is ``host:port`` (an ``http://`` prefix is tolerated); the master serves gRPC
and HTTP on that one port. ``https://host:port``, or ``DET_MASTER_CERT_FILE`` (a PEM file
with the CA certificate that signed the master's, as Determined names it) with no scheme,
means TLS, verified against that file or else the system's CAs. gRPC failures are turned
back into the shared error hierarchy so callers handle one kind of exception.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import AsyncIterator, Awaitable
from typing import TYPE_CHECKING, TypeVar

import grpclib.exceptions

from determined.common import errors

if TYPE_CHECKING:
    import asyncio
    import ssl

    import grpclib.client
    import grpclib.config

    from determined.api import channel
    from determined.api.gen import v1

DEFAULT_MASTER = "localhost:8080"
TOKEN_METADATA_KEY = "x-det-token"
CERT_FILE_ENV = "DET_MASTER_CERT_FILE"

T = TypeVar("T")


def master_address(explicit: str | None = None) -> str:
    """The master address from an explicit flag, else ``DET_MASTER``, else the default."""
    return explicit or os.environ.get("DET_MASTER") or DEFAULT_MASTER


def master_cert_file(explicit: str | None = None) -> str | None:
    """The CA file to verify the master with: ``explicit``, else ``DET_MASTER_CERT_FILE``."""
    return explicit or os.environ.get(CERT_FILE_ENV) or None


def uses_tls(address: str, cert_file: str | None) -> bool:
    """``https://`` means TLS and ``http://`` none; without a scheme, a CA file means TLS."""
    scheme, sep, _ = address.strip().partition("://")
    if sep:
        return scheme.lower() == "https"
    return cert_file is not None


def tls_context(
    cert_file: str | None, *, alpn: tuple[str, ...] = ("h2",), what: str = CERT_FILE_ENV
) -> ssl.SSLContext:
    """A client context that verifies the master against ``cert_file`` (else system CAs);
    ``what`` names where the file came from in the error for a bad one."""
    import ssl

    try:
        ctx = ssl.create_default_context(cafile=cert_file)
    except OSError as e:
        if isinstance(e, ssl.SSLError):
            reason = f"{cert_file} holds no PEM certificate ({e.reason or e})"
        else:
            reason = f"cannot read {cert_file}: {e.strerror or e}"
        raise errors.InvalidArgument(f"{what}: {reason}") from None
    if alpn:
        ctx.set_alpn_protocols(list(alpn))
    return ctx


def parse_address(address: str) -> tuple[str, int]:
    text = address.strip()
    for prefix in ("http://", "https://", "grpc://"):
        if text.startswith(prefix):
            text = text[len(prefix) :]
    text = text.rstrip("/")
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = text, "8080"
    host = host.strip("[]") or "localhost"
    try:
        port_no = int(port)
    except ValueError:
        raise errors.InvalidArgument(
            f"bad master address {address!r}: expected host:port, e.g. localhost:8080"
        ) from None
    return host, port_no


def open_channel(
    address: str,
    *,
    cert_file: str | None = None,
    config: grpclib.config.Configuration | None = None,
    noverify: bool = False,
) -> grpclib.client.Channel:
    """A channel to the master (bound to the running event loop); TLS as ``uses_tls`` says,
    with ``cert_file`` defaulting to ``DET_MASTER_CERT_FILE``; ``noverify`` accepts any
    certificate (the SDK's ``login(noverify=True)``)."""
    # Imported here: grpclib's client (with h2 and asyncio) and betterproto2 are what tasks
    # do without (they use blocking_channel).
    import grpclib.client

    from determined.common import wire

    host, port = parse_address(address)
    cert_file = master_cert_file(cert_file)
    tls = tls_context(cert_file) if uses_tls(address, cert_file) else None
    if tls is not None and noverify:
        import ssl

        tls.check_hostname = False
        tls.verify_mode = ssl.CERT_NONE
    return grpclib.client.Channel(host, port, ssl=tls, config=config, codec=wire.WireCodec())


def blocking_channel(address: str, *, cert_file: str | None = None) -> channel.Channel:
    """What tasks call the master with (``determined.api.channel``, light to import), with
    ``determined.api.lite`` messages; addresses and TLS as ``open_channel``."""
    from determined.api import channel

    host, port = parse_address(address)
    cert_file = master_cert_file(cert_file)
    tls = tls_context(cert_file) if uses_tls(address, cert_file) else None
    quiet_transport_logs()
    return channel.Channel(host, port, tls=tls)


# The HTTP/2 stack's loggers: at DEBUG, hpack alone writes a dozen lines per call, grpclib
# one per keepalive ping; below WARNING none of them says anything a user acts on.
TRANSPORT_LOGGERS = ("hpack", "h2", "grpclib")


def quiet_transport_logs() -> None:
    """Keep the transport's chatter out of a user's log: a training script that sets
    ``logging.DEBUG`` (as Determined's tutorials do) wants its own lines, not HTTP/2 frames.
    Called where the harness and the SDK make their clients, never by the master or agent.
    Their warnings still reach the user's handlers, and a level the script set on one of
    these loggers itself is left alone; the root logger is never touched."""
    for name in TRANSPORT_LOGGERS:
        logger = logging.getLogger(name)
        if logger.level == logging.NOTSET:
            logger.setLevel(logging.WARNING)


def quiet_event_loop() -> asyncio.AbstractEventLoop:
    """A new event loop, without asyncio's "Using selector" line: a loop the harness or the
    SDK runs in a thread of its own is their business, not a line in a user's DEBUG log."""
    import asyncio

    asyncio_log = logging.getLogger("asyncio")
    level = asyncio_log.level
    asyncio_log.setLevel(max(level, logging.INFO))
    try:
        return asyncio.new_event_loop()
    finally:
        asyncio_log.setLevel(level)


def metadata(token: str | None) -> dict[str, str]:
    return {TOKEN_METADATA_KEY: token} if token else {}


# How a user of the CLI picks another master; the SDK says it its own way.
CHOOSE_MASTER = "Set DET_MASTER or pass -m/--master to choose another address"


def translate(
    exc: BaseException, address: str, *, choose_master: str = CHOOSE_MASTER
) -> errors.DetError | None:
    """The shared error for a failed call, or None if ``exc`` is not an RPC failure;
    ``choose_master`` ends the message for a master that cannot be reached."""
    if isinstance(exc, grpclib.exceptions.GRPCError):
        cls = errors.BY_GRPC_STATUS.get(exc.status.name, errors.Internal)
        if exc.status.name == "UNAVAILABLE":
            return errors.Unavailable(f"the master at {address} is unavailable: {exc.message}")
        return cls(exc.message or exc.status.name)
    ssl = sys.modules.get("ssl")  # not imported: exc is no TLS failure
    if ssl is not None and isinstance(exc, ssl.SSLCertVerificationError):
        return errors.FailedPrecondition(
            f"cannot verify the master's certificate at {address} "
            f"({exc.verify_message or exc.reason}): set {CERT_FILE_ENV} to the CA "
            "certificate that signed it"
        )
    if is_tls_failure(exc):
        assert ssl is not None and isinstance(exc, ssl.SSLError)
        return errors.FailedPrecondition(
            f"the TLS handshake with the master at {address} failed ({exc.reason or exc}); "
            f"does it serve TLS? For a master without TLS use http://HOST:PORT and unset "
            f"{CERT_FILE_ENV}"
        )
    if isinstance(exc, (ConnectionError, OSError, grpclib.exceptions.StreamTerminatedError)):
        hint = ""
        dropped = (
            grpclib.exceptions.StreamTerminatedError,
            ConnectionResetError,
            ConnectionAbortedError,
        )
        if isinstance(exc, dropped) and not uses_tls(address, master_cert_file()):
            # A plain client's bytes end a TLS master's handshake: the connection just drops.
            hint = f" (for a master that serves TLS: https://HOST:PORT and {CERT_FILE_ENV})"
        return errors.Unavailable(
            f"cannot reach the master at {address} ({exc.__class__.__name__}: {exc}); "
            f"is it running? {choose_master}" + hint
        )
    return None


def is_tls_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is a TLS failure that retrying cannot mend (a bad certificate, a
    master without TLS); a connection cut mid-handshake is not one."""
    ssl = sys.modules.get("ssl")  # not imported (no TLS channel was made): not a TLS failure
    return (
        ssl is not None
        and isinstance(exc, ssl.SSLError)
        and not isinstance(exc, (ssl.SSLEOFError, ssl.SSLZeroReturnError))
    )


async def call(awaitable: Awaitable[T], address: str, *, choose_master: str = CHOOSE_MASTER) -> T:
    """Await one RPC, raising the shared error hierarchy instead of transport errors."""
    try:
        return await awaitable
    except Exception as e:
        translated = translate(e, address, choose_master=choose_master)
        if translated is None:
            raise
        raise translated from None


class Session:
    """A channel and stub to one master, with the caller's token on every call."""

    def __init__(
        self,
        address: str | None = None,
        *,
        token: str | None = None,
        cert_file: str | None = None,
        noverify: bool = False,
        choose_master: str = CHOOSE_MASTER,
    ) -> None:
        self.address = master_address(address)
        self.noverify = noverify
        self.choose_master = choose_master
        self.token = token
        # Calls the master has answered: a caller retrying after a refused session knows
        # whether anything may already have happened.
        self.answered = 0
        self.cert_file = master_cert_file(cert_file)
        self._channel: grpclib.client.Channel | None = None

    @property
    def stub(self) -> v1.DeterminedStub:
        if self._channel is None:
            self._channel = open_channel(
                self.address, cert_file=self.cert_file, noverify=self.noverify
            )
        from determined.api.gen import v1

        return v1.DeterminedStub(self._channel, metadata=metadata(self.token))

    async def call(self, awaitable: Awaitable[T]) -> T:
        result = await call(awaitable, self.address, choose_master=self.choose_master)
        self.answered += 1
        return result

    def close(self) -> None:
        if self._channel is not None:
            self._channel.close()
            self._channel = None


@contextlib.asynccontextmanager
async def session(
    address: str | None = None,
    *,
    token: str | None = None,
    cert_file: str | None = None,
) -> AsyncIterator[Session]:
    s = Session(address, token=token, cert_file=cert_file)
    try:
        yield s
    finally:
        s.close()
