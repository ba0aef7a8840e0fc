"""The CLI's bridge from synchronous commands to the async gRPC API.

Each invocation opens one Session inside one `asyncio.run`, so a command that makes several
calls shares a single HTTP/2 connection. Streams get the same error translation as unary
calls: a master that dies mid-stream is an `Unavailable`, not a transport traceback.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

from determined.common import client, errors
from pydet.cli import auth

T = TypeVar("T")
M = TypeVar("M")


def run(
    master: str | None,
    body: Callable[[client.Session], Awaitable[T]],
    *,
    authenticated: bool = True,
) -> T:
    """Run `body` with a Session to the master chosen by `-m`, `DET_MASTER` or the default,
    logged in as the user `auth` picks (unless `authenticated` is False: login itself)."""

    async def main() -> T:
        async with client.session(master) as session:
            if not authenticated:
                return await body(session)
            await auth.authenticate(session)
            session.answered = 0
            try:
                return await body(session)
            except errors.Unauthenticated as refusal:
                # The session expired or was revoked. Run the command again with a new one
                # only if the master had answered none of its calls: a repeated create
                # would make a second experiment. What was answered is stored either way.
                refused = session.token
                if session.answered == 0 and await auth.refresh(session):
                    return await body(session)
                raise auth.not_logged_in(
                    session.address, auth.why_refused(refused, refusal)
                ) from None

    return asyncio.run(main())


def present(value: M | None, what: str) -> M:
    """A sub-message every answer must carry (proto3 leaves it optional on the wire)."""
    if value is None:
        raise errors.DetError(f"the master's answer carries no {what}; is it a pydet master?")
    return value


async def stream(session: client.Session, responses: AsyncIterator[T]) -> AsyncIterator[T]:
    """Iterate a server stream, raising the shared errors instead of grpclib's."""
    try:
        async for response in responses:
            session.answered += 1
            yield response
    except Exception as e:
        translated = client.translate(e, session.address)
        if translated is None:
            raise
        raise translated from None
