"""JSON routes for the cluster: agents, resource pools and the job queue (at pydet's paths
and Determined's ``/api/v1/job-queues``)."""

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


def job_updates(body: Any) -> list[v1.JobUpdate]:
    """The updates of a POST body: Determined's UpdateJobQueueRequest (``{"updates": [...]}``)
    or, as pydet's WebUI sends it, the list alone; each must name its job."""
    if isinstance(body, list):
        body = {"updates": body}
    try:
        req = protojson.parse(v1.UpdateJobQueueRequest, body)
    except protojson.ParseError as e:
        raise errors.InvalidArgument(str(e)) from None
    if not req.updates:
        raise errors.InvalidArgument("updates: expected a non-empty list of job updates")
    for i, update in enumerate(req.updates):
        if not update.job_id:
            raise errors.InvalidArgument(f"updates[{i}].jobId: required")
    return list(req.updates)


def routes(service: Service) -> list[Route]:
    async def agents(request: Request) -> Response:
        return codec.message(service.get_agents())

    async def resource_pools(request: Request) -> Response:
        return codec.message(service.get_resource_pools())

    async def jobs(request: Request) -> Response:
        return codec.message(service.get_jobs(codec.query_message(request, v1.GetJobsRequest)))

    async def update_jobs(request: Request) -> Response:
        updates = job_updates(await codec.json_body(request))
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
        # Determined's paths for the same (GetJobs, UpdateJobQueue).
        Route("/api/v1/job-queues", jobs, methods=["GET"]),
        Route("/api/v1/job-queues", update_jobs, methods=["POST"]),
    ]
