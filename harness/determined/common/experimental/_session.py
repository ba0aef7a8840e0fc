"""The Python SDK's synchronous handle on one master.

SDK objects are plain blocking Python, while the API client is asyncio (grpclib). Each
``MasterSession`` runs its own event loop on a daemon thread and submits every call to it,
so the SDK works the same from a script, a thread, or a notebook whose own loop is running,
and all calls share one HTTP/2 connection.

Credentials are the CLI's (``determined.common.credentials``): the user passed to
``login()``, else ``DET_USER``, else whoever last ran ``det user login`` against this master;
that user's cached session, else ``DET_USER_TOKEN`` (an access token), else a login with the
password passed or ``DET_PASS``.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import http.client
import json
import os
import threading
import weakref
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from typing import TYPE_CHECKING, Any, TypeVar, cast

from determined.common import client, credentials, errors

if TYPE_CHECKING:
    from determined.api.gen import v1

T = TypeVar("T")

HOW_TO_LOG_IN = (
    "run det user login, pass user= and password= to client.login(), or set DET_USER and DET_PASS"
)

CHOOSE_MASTER = "Pass master= to client.login() or set DET_MASTER to choose another address"

_END = object()
# Seconds an HTTP request to the master may go without a byte.
HTTP_TIMEOUT = 300.0


class MasterSession:
    """One master, one user, one connection; safe to use from several threads."""

    def __init__(
        self,
        master: str | None = None,
        user: str | None = None,
        password: str | None = None,
        *,
        cert_path: str | None = None,
        noverify: bool = False,
    ) -> None:
        self.address = client.master_address(master)
        client.quiet_transport_logs()
        self._user = user
        self._password = password
        self._session = client.Session(
            self.address, cert_file=cert_path, noverify=noverify, choose_master=CHOOSE_MASTER
        )
        self._from_cache = False
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._close_at_exit: Callable[[], None] = lambda: None

    @property
    def username(self) -> str | None:
        """Who the calls run as, once known."""
        return credentials.wanted_user(self.address, self._user)

    def call(self, rpc: Callable[[v1.DeterminedStub], Awaitable[T]]) -> T:
        """Make one unary call, logging in first if needed (and once more if the master
        refuses an expired session while a password is at hand)."""
        return self._run(self._call(rpc))

    def session_token(self) -> str:
        """The user's session token (logging in first if needed): what an unmanaged run's
        Core API reports with."""

        async def token() -> str:
            if self._session.token is None:
                await self._authenticate()
            assert self._session.token is not None
            return self._session.token

        return self._run(token())

    def stream(self, rpc: Callable[[v1.DeterminedStub], AsyncIterator[T]]) -> Iterator[T]:
        """Iterate a server stream; each item is fetched when the caller asks for it, and
        leaving the loop early closes the stream."""
        responses = self._run(self._open_stream(rpc))
        try:
            while True:
                item = self._run(_next(responses))
                if item is _END:
                    return
                yield cast(T, item)
        finally:
            with contextlib.suppress(Exception):
                self._run(responses.aclose())

    @contextlib.contextmanager
    def http_get(self, path: str, *, accept: str) -> Iterator[http.client.HTTPResponse]:
        """GET ``path`` from the master's HTTP API as this session's user (for what the
        gRPC API does not carry, such as a checkpoint's files); the response is read in the
        ``with`` block. A refusal is an error of the shared hierarchy, with the master's
        message."""
        token = self.session_token()
        host, port = client.parse_address(self.address)
        if client.uses_tls(self.address, self._session.cert_file):
            import ssl

            context = client.tls_context(self._session.cert_file, alpn=("http/1.1",))
            if self._session.noverify:
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
            conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                host, port, context=context, timeout=HTTP_TIMEOUT
            )
        else:
            conn = http.client.HTTPConnection(host, port, timeout=HTTP_TIMEOUT)
        with contextlib.closing(conn):
            try:
                headers = {"Authorization": f"Bearer {token}", "Accept": accept}
                conn.request("GET", path, headers=headers)
                resp = conn.getresponse()
            except OSError as e:
                raise errors.Unavailable(
                    f"cannot reach the master at {self.address} ({e.__class__.__name__}: {e}); "
                    f"is it running? {CHOOSE_MASTER}"
                ) from None
            with resp:
                if resp.status != 200:
                    body = resp.read()
                    try:
                        message = str(json.loads(body)["error"])
                    except (ValueError, KeyError, TypeError):
                        message = f"{resp.status} {resp.reason}"
                    raise errors.BY_HTTP_STATUS.get(resp.status, errors.Internal)(message)
                yield resp

    def logged_in_user(self) -> str:
        """The user the calls run as, logging in first if needed."""
        self.session_token()
        username = credentials.wanted_user(self.address, self._user)
        assert username is not None
        return username

    def logout(self) -> None:
        """End the session on the master and forget the cached one (``det user logout``
        does the same); nothing if there is none."""
        self._run(self._logout())

    def close(self) -> None:
        """Close the connection and stop the loop thread; idempotent."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return
        atexit.unregister(self._close_at_exit)

        async def shut() -> None:
            self._session.close()

        asyncio.run_coroutine_threadsafe(shut(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()

    # On the loop thread.

    async def _call(self, rpc: Callable[[v1.DeterminedStub], Awaitable[T]]) -> T:
        if self._session.token is None:
            await self._authenticate()
        try:
            return await self._session.call(rpc(self._session.stub))
        except errors.Unauthenticated as refusal:
            # The master refuses before doing anything, so one retry cannot act twice.
            refused = self._session.token
            if not await self._log_in_again():
                why = (
                    refusal.message
                    if credentials.is_access_token(refused)
                    else f"the session with {self.address} has expired or was revoked"
                )
                raise errors.Unauthenticated(f"{why}: " + HOW_TO_LOG_IN) from None
            return await self._session.call(rpc(self._session.stub))

    async def _open_stream(
        self, rpc: Callable[[v1.DeterminedStub], AsyncIterator[T]]
    ) -> AsyncGenerator[T, None]:
        if self._session.token is None:
            await self._authenticate()
        return _translated(rpc(self._session.stub), self.address)

    async def _logout(self) -> None:
        from determined.api.gen import v1

        username = credentials.wanted_user(self.address, self._user)
        token = self._session.token
        if token is None and username is not None:
            token = credentials.cached_token(self.address, username)
        if username is not None:
            with contextlib.suppress(OSError):
                credentials.forget(self.address, username)
        self._from_cache = False
        if token is None:
            return
        self._session.token = token
        try:
            await self._session.call(self._session.stub.logout(v1.LogoutRequest()))
        except (errors.Unauthenticated, errors.PermissionDenied):
            pass  # the session had ended already
        finally:
            self._session.token = None

    async def _authenticate(self) -> None:
        username = credentials.wanted_user(self.address, self._user)
        if username is not None and self._password is not None:
            # An explicit password means a fresh session, as Determined's login() does.
            await credentials.login(self._session, username, self._password)
            return
        token = credentials.cached_token(self.address, username) if username else None
        if token is not None:
            self._session.token = token
            self._from_cache = True
            return
        token = credentials.env_token(self._user)
        if token is not None:
            self._session.token = token
            return
        if username is None:
            raise await credentials.why_not_logged_in(self._session, HOW_TO_LOG_IN)
        password = os.environ.get("DET_PASS")
        if password is None:
            raise await credentials.why_not_logged_in(self._session, HOW_TO_LOG_IN)
        await credentials.login(self._session, username, password)

    async def _log_in_again(self) -> bool:
        username = credentials.wanted_user(self.address, self._user)
        password = self._password if self._password is not None else os.environ.get("DET_PASS")
        if username is None:
            return False
        if self._from_cache:
            with contextlib.suppress(OSError):
                credentials.forget(self.address, username)
            self._from_cache = False
        if password is None:
            return False
        await credentials.login(self._session, username, password)
        return True

    # Bridging.

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        loop = self._running_loop()
        if threading.current_thread() is self._thread:
            coro.close()
            # Waiting here for the loop this thread runs would wait forever.
            raise RuntimeError("the SDK's blocking calls cannot be made from its own loop thread")
        return asyncio.run_coroutine_threadsafe(coro, loop).result()

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = client.quiet_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name=f"det-sdk {self.address}", daemon=True
                )
                thread.start()
                self._loop, self._thread = loop, thread
                # Close the connection before the interpreter goes (grpclib warns about
                # an unclosed one), without keeping a forgotten session alive until then.
                ref = weakref.ref(self)

                def close_at_exit() -> None:
                    session = ref()
                    if session is not None:
                        session.close()

                self._close_at_exit = close_at_exit
                atexit.register(close_at_exit)
            return self._loop


async def _next(responses: AsyncGenerator[T, None]) -> T | object:
    try:
        return await anext(responses)
    except StopAsyncIteration:
        return _END


async def _translated(responses: AsyncIterator[T], address: str) -> AsyncGenerator[T, None]:
    """A server stream raising the shared errors instead of grpclib's."""
    try:
        async for response in responses:
            yield response
    except Exception as e:
        translated = client.translate(e, address, choose_master=CHOOSE_MASTER)
        if translated is None:
            raise
        raise translated from None
