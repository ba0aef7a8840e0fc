"""What the CLI's users type (user, group and role names) as the ids the API takes, with
one line naming what does not exist."""

from __future__ import annotations

from collections.abc import Sequence

from determined.api.gen import v1
from determined.common import client, errors


async def users(session: client.Session) -> dict[str, v1.User]:
    found = await session.call(session.stub.get_users(v1.GetUsersRequest()))
    return {u.username: u for u in found.users}


async def user_ids(session: client.Session, names: Sequence[str]) -> list[int]:
    known = await users(session)
    for name in names:
        if name not in known:
            raise errors.NotFound(f"user {name} not found")
    return [known[name].id for name in names]


async def usernames(session: client.Session) -> dict[int, str]:
    return {u.id: u.username for u in (await users(session)).values()}


async def group_id(session: client.Session, name: str) -> int:
    found = await session.call(session.stub.get_groups(v1.GetGroupsRequest(name=name)))
    for g in found.groups:
        if g.group is not None and g.group.name == name:
            return g.group.group_id
    raise errors.NotFound(f"user group {name!r} not found (det user-group list)")


async def roles(session: client.Session) -> list[v1.Role]:
    found = await session.call(
        session.stub.search_roles_assignable_to_scope(v1.SearchRolesAssignableToScopeRequest())
    )
    return list(found.roles)


async def role(session: client.Session, name: str) -> v1.Role:
    known = await roles(session)
    for r in known:
        if r.name == name:
            return r
    raise errors.NotFound(
        f"role {name!r} does not exist (roles: {', '.join(r.name for r in known)})"
    )
