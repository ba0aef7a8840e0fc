"""JSON routes for access tokens, user groups and roles, at Determined's paths
(``/api/v1/tokens``, ``/api/v1/groups``, ``/api/v1/roles/...``, ``/api/v1/permissions/summary``).

Each route is one RPC: the request message is read from the path's parameters, the query
string (GET and DELETE) and the JSON body (the proto3 JSON mapping: Determined's camelCase
keys, or snake_case, read as protojson reads them), checked against the RPC's rule as over
gRPC, and answered by ``auth.access`` with the same code the servicer uses. A field that is
not the message's, or a value of the wrong type, is a 400 naming it.
"""

from __future__ import annotations

import re
from typing import Any

import betterproto2
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from determined.api.gen import v1
from pydet.master.auth.access import Access
from pydet.master.gateway import auth as gateway_auth
from pydet.master.gateway import codec

# (method, path, RPC, request type); path parameters are the message's fields.
ROUTES: tuple[tuple[str, str, str, type[betterproto2.Message]], ...] = (
    ("POST", "/api/v1/tokens", "PostAccessToken", v1.PostAccessTokenRequest),
    ("GET", "/api/v1/tokens", "GetAccessTokens", v1.GetAccessTokensRequest),
    ("PATCH", "/api/v1/tokens/{token_id:int}", "PatchAccessToken", v1.PatchAccessTokenRequest),
    ("GET", "/api/v1/groups/{group_id:int}", "GetGroup", v1.GetGroupRequest),
    ("POST", "/api/v1/groups/search", "GetGroups", v1.GetGroupsRequest),
    ("POST", "/api/v1/groups", "CreateGroup", v1.CreateGroupRequest),
    ("PUT", "/api/v1/groups/{group_id:int}", "UpdateGroup", v1.UpdateGroupRequest),
    ("DELETE", "/api/v1/groups/{group_id:int}", "DeleteGroup", v1.DeleteGroupRequest),
    ("PATCH", "/api/v1/users/assignments", "AssignMultipleGroups", v1.AssignMultipleGroupsRequest),
    (
        "GET",
        "/api/v1/permissions/summary",
        "GetPermissionsSummary",
        v1.GetPermissionsSummaryRequest,
    ),
    ("POST", "/api/v1/roles/search/by-ids", "GetRolesByID", v1.GetRolesByIdRequest),
    (
        "GET",
        "/api/v1/roles/search/by-user/{user_id:int}",
        "GetRolesAssignedToUser",
        v1.GetRolesAssignedToUserRequest,
    ),
    (
        "GET",
        "/api/v1/roles/search/by-group/{group_id:int}",
        "GetRolesAssignedToGroup",
        v1.GetRolesAssignedToGroupRequest,
    ),
    (
        "GET",
        "/api/v1/roles/workspace/{workspace_id:int}",
        "GetGroupsAndUsersAssignedToWorkspace",
        v1.GetGroupsAndUsersAssignedToWorkspaceRequest,
    ),
    (
        "POST",
        "/api/v1/roles/search/by-assignability",
        "SearchRolesAssignableToScope",
        v1.SearchRolesAssignableToScopeRequest,
    ),
    ("POST", "/api/v1/roles/search", "ListRoles", v1.ListRolesRequest),
    ("POST", "/api/v1/roles/add-assignments", "AssignRoles", v1.AssignRolesRequest),
    ("POST", "/api/v1/roles/remove-assignments", "RemoveAssignments", v1.RemoveAssignmentsRequest),
)


def method_name(rpc: str) -> str:
    """``GetRolesByID`` -> ``get_roles_by_id``: the servicer's (and ``Access``'s) name."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", rpc.replace("ByID", "ById")).lower()


async def request_message(
    request: Request, kind: type[betterproto2.Message]
) -> betterproto2.Message:
    """The RPC's request as Determined's gateway reads it: a GET's or DELETE's query string,
    another method's body, in protobuf's JSON mapping; then the path's parameters."""
    if request.method in ("GET", "DELETE"):
        message = codec.query_message(request, kind)
    else:
        message = await codec.body(request, kind)
    for name, value in request.path_params.items():
        setattr(message, name, value)
    return message


def routes(access: Access) -> list[Route]:
    def endpoint(rpc: str, kind: type[betterproto2.Message]) -> Any:
        call = getattr(access, method_name(rpc))

        async def handle(request: Request) -> Response:
            message = await request_message(request, kind)
            await gateway_auth.authorize(request, rpc, message)
            return codec.message(await call(gateway_auth.caller(request), message))

        return handle

    return [
        Route(path, endpoint(rpc, kind), methods=[method], name=rpc)
        for method, path, rpc, kind in ROUTES
    ]
