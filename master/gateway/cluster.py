"""JSON routes for the cluster: agents, resource pools and the job queue."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from determined.api.gen import v1
from determined.common import errors, protojson
from pydet.master.gateway import auth as gateway_auth
from pydet.master.gateway import codec
from pydet.master.service import Service

_UPDATE_FIELDS: dict[str, type] = {
    "job_id": str,
    "priority": int,
    "weight": float,
    "resource_pool": str,
    "ahead_of": str,
    "behind_of": str,
}


def job_update(raw: Any, index: int) -> v1.JobUpdate:
    if not isinstance(raw, dict):
        raise errors.InvalidArgument(f"updates[{index}]: expected an object")
    known = {*_UPDATE_FIELDS, *(protojson.json_name(name) for name in _UPDATE_FIELDS)}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise errors.InvalidArgument(f"updates[{index}]: unknown fields {', '.join(unknown)}")
    values: dict[str, Any] = {}
    for name, kind in _UPDATE_FIELDS.items():
        try:
            values[name] = codec.field(raw, name, kind)
        except errors.InvalidArgument as e:
            raise errors.InvalidArgument(f"updates[{index}].{e.message}") from None
    if not values["job_id"]:
        raise errors.InvalidArgument(f"updates[{index}].job_id: required")
    return v1.JobUpdate(**values)


def routes(service: Service) -> list[Route]:
    async def agents(request: Request) -> Response:
        return codec.message(service.get_agents())

    async def resource_pools(request: Request) -> Response:
        return codec.message(v1.GetResourcePoolsResponse(pools=service.get_resource_pools()))

    async def jobs(request: Request) -> Response:
        pool = codec.query(request, "resource_pool")
        return codec.message(v1.GetJobsResponse(jobs=service.get_jobs(pool)))

    async def update_jobs(request: Request) -> Response:
        body = await codec.json_body(request)
        if isinstance(body, dict) and "updates" in body:
            body = body["updates"]
        if not isinstance(body, list) or not body:
            raise errors.InvalidArgument("request body: expected a non-empty list of job updates")
        updates = [job_update(raw, i) for i, raw in enumerate(body)]
        await gateway_auth.authorize(
            request, "UpdateJobQueue", v1.UpdateJobQueueRequest(updates=updates)
        )
        await service.update_job_queue(updates)
        return codec.message(v1.UpdateJobQueueResponse())

    return [
        Route("/api/v1/agents", agents, methods=["GET"]),
        Route("/api/v1/resource-pools", resource_pools, methods=["GET"]),
        Route("/api/v1/jobs", jobs, methods=["GET"]),
        Route("/api/v1/jobs/update", update_jobs, methods=["POST"]),
    ]
