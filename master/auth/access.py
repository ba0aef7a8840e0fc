"""The calls of access tokens, user groups and roles, for both transports: the gRPC
servicer and the HTTP gateway pass the caller (already authorized by ``rules``) and the
request message, and send the answer on. Each method is named as its RPC is.

Where Determined cuts a list down to what the caller may see, so does this: the groups one
is in (all of them with ASSIGN_ROLES), one's own access tokens (everybody's with
VIEW_OTHER_TOKEN), the roles one holds (all of them with ASSIGN_ROLES or UPDATE_ROLES).
"""

from __future__ import annotations

from typing import TypeVar

from determined.api.gen import v1
from determined.common import errors
from determined.common.pagination import pagination
from pydet.master import queries
from pydet.master.auth import permissions as perms
from pydet.master.auth import roles
from pydet.master.auth import rules as authz
from pydet.master.auth.authenticator import Authenticator
from pydet.master.auth.callers import UserCaller
from pydet.master.auth.users import user_message

T = TypeVar("T")
P = perms.P

# The RPCs answered here (both transports route them by these names).
RPCS = (
    "PostAccessToken",
    "GetAccessTokens",
    "PatchAccessToken",
    "GetGroup",
    "GetGroups",
    "CreateGroup",
    "UpdateGroup",
    "DeleteGroup",
    "AssignMultipleGroups",
    "GetPermissionsSummary",
    "GetRolesByID",
    "GetRolesAssignedToUser",
    "GetRolesAssignedToGroup",
    "GetGroupsAndUsersAssignedToWorkspace",
    "SearchRolesAssignableToScope",
    "ListRoles",
    "AssignRoles",
    "RemoveAssignments",
)


def _page(items: list[T], offset: int, limit: int) -> list[T]:
    items = items[max(offset, 0) :]
    return items[:limit] if limit > 0 else items


class Access:
    def __init__(self, auth: Authenticator, lookup: authz.Lookup) -> None:
        self.auth = auth
        self.lookup = lookup

    async def _holds(self, caller: UserCaller, permission: perms.P) -> bool:
        return await authz.holds(caller, permission, self.lookup)

    # -- access tokens ---------------------------------------------------------------------

    async def post_access_token(
        self, caller: UserCaller, message: v1.PostAccessTokenRequest
    ) -> v1.PostAccessTokenResponse:
        return await self.auth.tokens.create(
            message.user_id,
            lifespan=message.lifespan,
            description=message.description,
            by=caller.username,
        )

    async def get_access_tokens(
        self, caller: UserCaller, message: v1.GetAccessTokensRequest
    ) -> v1.GetAccessTokensResponse:
        user_id: int | None = None
        if message.username:
            found = await queries.user(self.auth.db, message.username)
            if found is None:
                raise errors.NotFound(f"user {message.username} not found")
            user_id = found.id
        elif not await self._holds(caller, P.VIEW_OTHER_TOKEN):
            user_id = caller.id
        infos = await self.auth.tokens.infos(
            user_id=user_id,
            token_ids=list(message.token_ids),
            show_inactive=message.show_inactive,
        )
        return v1.GetAccessTokensResponse(
            token_info=_page(infos, message.offset, message.limit),
            pagination=pagination(len(infos), message.offset, message.limit),
        )

    async def patch_access_token(
        self, caller: UserCaller, message: v1.PatchAccessTokenRequest
    ) -> v1.PatchAccessTokenResponse:
        info = await self.auth.tokens.patch(
            message.token_id,
            description=message.description,
            revoke=message.set_revoked,
            by=caller.username,
        )
        return v1.PatchAccessTokenResponse(token_info=info)

    # -- groups ----------------------------------------------------------------------------

    async def get_group(
        self, caller: UserCaller, message: v1.GetGroupRequest
    ) -> v1.GetGroupResponse:
        return v1.GetGroupResponse(group=await self.auth.groups.details(message.group_id))

    async def get_groups(
        self, caller: UserCaller, message: v1.GetGroupsRequest
    ) -> v1.GetGroupsResponse:
        sees_all = await self._holds(caller, P.ASSIGN_ROLES)
        groups = await self.auth.groups.search(
            user_id=message.user_id,
            name=message.name,
            offset=0,
            limit=0,
            visible_to=None if sees_all else caller.id,
        )
        return v1.GetGroupsResponse(
            groups=_page(groups, message.offset, message.limit),
            pagination=pagination(len(groups), message.offset, message.limit),
        )

    async def create_group(
        self, caller: UserCaller, message: v1.CreateGroupRequest
    ) -> v1.CreateGroupResponse:
        group = await self.auth.groups.create(
            message.name, list(message.add_users), by=caller.username
        )
        return v1.CreateGroupResponse(group=group)

    async def update_group(
        self, caller: UserCaller, message: v1.UpdateGroupRequest
    ) -> v1.UpdateGroupResponse:
        group = await self.auth.groups.update(
            message.group_id,
            name=message.name,
            add_users=list(message.add_users),
            remove_users=list(message.remove_users),
            by=caller.username,
        )
        return v1.UpdateGroupResponse(group=group)

    async def delete_group(
        self, caller: UserCaller, message: v1.DeleteGroupRequest
    ) -> v1.DeleteGroupResponse:
        await self.auth.groups.delete(message.group_id, by=caller.username)
        return v1.DeleteGroupResponse()

    async def assign_multiple_groups(
        self, caller: UserCaller, message: v1.AssignMultipleGroupsRequest
    ) -> v1.AssignMultipleGroupsResponse:
        await self.auth.groups.assign_multiple(
            list(message.user_ids),
            list(message.add_groups),
            list(message.remove_groups),
            by=caller.username,
        )
        return v1.AssignMultipleGroupsResponse()

    # -- roles -----------------------------------------------------------------------------

    async def get_permissions_summary(
        self, caller: UserCaller, message: v1.GetPermissionsSummaryRequest
    ) -> v1.GetPermissionsSummaryResponse:
        return await self.auth.roles.summary(caller.id)

    async def get_roles_by_id(
        self, caller: UserCaller, message: v1.GetRolesByIdRequest
    ) -> v1.GetRolesByIdResponse:
        found = await self.auth.roles.with_assignments(list(message.role_ids))
        return v1.GetRolesByIdResponse(roles=found)

    async def get_roles_assigned_to_user(
        self, caller: UserCaller, message: v1.GetRolesAssignedToUserRequest
    ) -> v1.GetRolesAssignedToUserResponse:
        found = await self.auth.roles.of_user(message.user_id)
        return v1.GetRolesAssignedToUserResponse(roles=found)

    async def get_roles_assigned_to_group(
        self, caller: UserCaller, message: v1.GetRolesAssignedToGroupRequest
    ) -> v1.GetRolesAssignedToGroupResponse:
        return await self.auth.roles.of_group(message.group_id)

    async def get_groups_and_users_assigned_to_workspace(
        self, caller: UserCaller, message: v1.GetGroupsAndUsersAssignedToWorkspaceRequest
    ) -> v1.GetGroupsAndUsersAssignedToWorkspaceResponse:
        """Who holds a role on the workspace: its groups (with their members) and the users
        it is assigned to directly; ``name`` keeps those whose name (a user's display name,
        or username without one) has it in it, in any case."""
        await self.lookup.workspace_owner(message.workspace_id)  # NotFound
        wanted = message.name.lower()
        assignments = await self.auth.roles.on_workspace(message.workspace_id)
        group_ids = sorted({g.group_id for a in assignments for g in a.group_role_assignments})
        groups = [await self.auth.groups.details(g) for g in group_ids]
        groups = [g for g in groups if wanted in g.name.lower()]
        direct = {u.user_id for a in assignments for u in a.user_role_assignments}
        users = [
            user_message(u)
            for u in await queries.users(self.auth.db)
            if u.id in direct and wanted in (u.display_name or u.username).lower()
        ]
        kept_groups = {g.group_id for g in groups}
        kept_users = {u.id for u in users}
        for a in assignments:
            a.group_role_assignments = [
                g for g in a.group_role_assignments if g.group_id in kept_groups
            ]
            a.user_role_assignments = [
                u for u in a.user_role_assignments if u.user_id in kept_users
            ]
        return v1.GetGroupsAndUsersAssignedToWorkspaceResponse(
            groups=groups,
            users_assigned_directly=users,
            assignments=[
                a for a in assignments if a.group_role_assignments or a.user_role_assignments
            ],
        )

    async def search_roles_assignable_to_scope(
        self, caller: UserCaller, message: v1.SearchRolesAssignableToScopeRequest
    ) -> v1.SearchRolesAssignableToScopeResponse:
        found = [r for r in perms.ROLES if message.workspace_id is None or not r.global_only]
        page = _page(found, message.offset, message.limit)
        return v1.SearchRolesAssignableToScopeResponse(roles=[perms.role_message(r) for r in page])

    async def list_roles(
        self, caller: UserCaller, message: v1.ListRolesRequest
    ) -> v1.ListRolesResponse:
        found = list(perms.ROLES)
        if not (
            await self._holds(caller, P.ASSIGN_ROLES) or await self._holds(caller, P.UPDATE_ROLES)
        ):
            own = await self.auth.grants.roles_anywhere(caller.id)
            found = [r for r in found if r.id in own]
        page = _page(found, message.offset, message.limit)
        return v1.ListRolesResponse(roles=[perms.role_message(r) for r in page])

    async def assign_roles(
        self, caller: UserCaller, message: v1.AssignRolesRequest
    ) -> v1.AssignRolesResponse:
        wanted = roles.assignments(message.user_role_assignments, message.group_role_assignments)
        await self.auth.roles.assign(wanted, by=caller.username)
        return v1.AssignRolesResponse()

    async def remove_assignments(
        self, caller: UserCaller, message: v1.RemoveAssignmentsRequest
    ) -> v1.RemoveAssignmentsResponse:
        wanted = roles.assignments(message.user_role_assignments, message.group_role_assignments)
        await self.auth.roles.remove(wanted, by=caller.username, by_id=caller.id)
        return v1.RemoveAssignmentsResponse()
