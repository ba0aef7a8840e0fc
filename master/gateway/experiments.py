"""JSON routes for experiments and trials: each decodes its parameters, calls one Service
operation (the same one the gRPC servicer calls) and encodes the answer."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from determined.api.gen import v1
from determined.common import errors
from pydet.master import convert
from pydet.master.gateway import auth as gateway_auth
from pydet.master.gateway import codec
from pydet.master.service import Service

EXPERIMENT_ACTIONS = ("activate", "pause", "cancel", "kill", "archive", "unarchive")


def routes(service: Service) -> list[Route]:
    async def list_experiments(request: Request) -> Response:
        req = codec.query_message(request, v1.GetExperimentsRequest)
        return codec.message(await service.get_experiments(req))

    async def create_experiment(request: Request) -> Response:
        req = await codec.body(request, v1.CreateExperimentRequest)
        if not req.config:
            raise errors.InvalidArgument("config: required (the experiment config as YAML)")
        # The owner is whoever is logged in; without files or an archive, the parent's
        # context is reused (or the image holds the code).
        req.username = gateway_auth.caller(request).username
        await gateway_auth.authorize(request, "CreateExperiment", req)
        return codec.message(await service.create_experiment(req))

    async def get_experiment(request: Request) -> Response:
        return codec.message(await service.get_experiment(codec.integer(request, "id")))

    async def delete_experiment(request: Request) -> Response:
        exp_id = codec.integer(request, "id")
        await gateway_auth.authorize(
            request, "DeleteExperiment", v1.ExperimentActionRequest(experiment_id=exp_id)
        )
        await service.experiment_action("delete", exp_id)
        return JSONResponse({})

    async def experiment_action(request: Request) -> Response:
        action = str(request.path_params["action"])
        if action not in EXPERIMENT_ACTIONS:
            raise errors.NotFound(
                f"unknown experiment action {action!r}; one of {', '.join(EXPERIMENT_ACTIONS)}"
            )
        exp_id = codec.integer(request, "id")
        await gateway_auth.authorize(
            request,
            f"{action.capitalize()}Experiment",
            v1.ExperimentActionRequest(experiment_id=exp_id),
        )
        return codec.message(await service.experiment_action(action, exp_id))

    async def experiment_trials(request: Request) -> Response:
        req = codec.query_message(request, v1.GetExperimentTrialsRequest)
        req.experiment_id = codec.integer(request, "id")
        return codec.message(await service.get_experiment_trials(req))

    async def experiment_checkpoints(request: Request) -> Response:
        found = await service.get_checkpoints(experiment_id=codec.integer(request, "id"))
        return codec.message(
            v1.GetCheckpointsResponse(checkpoints=found, pagination=convert.pagination(len(found)))
        )

    async def get_trial(request: Request) -> Response:
        trial = await service.get_trial(codec.integer(request, "id"))
        return codec.message(v1.GetTrialResponse(trial=trial))

    async def kill_trial(request: Request) -> Response:
        trial_id = codec.integer(request, "id")
        await gateway_auth.authorize(request, "KillTrial", v1.KillTrialRequest(trial_id=trial_id))
        await service.kill_trial(trial_id)
        return codec.message(v1.KillTrialResponse())

    async def trial_metrics(request: Request) -> Response:
        req = v1.GetTrialMetricsRequest(
            trial_id=codec.integer(request, "id"),
            group=codec.query(request, "group"),
            after_steps=codec.integer(request, "after_steps", minimum=None),
            limit=codec.integer(request, "limit"),
        )
        # max_points (not in the gRPC request): a thinned first view for charts.
        max_points = codec.integer(request, "max_points")
        return codec.json_text(await service.get_trial_metrics_json(req, max_points=max_points))

    async def trial_checkpoints(request: Request) -> Response:
        found = await service.get_checkpoints(trial_id=codec.integer(request, "id"))
        return codec.message(
            v1.GetCheckpointsResponse(checkpoints=found, pagination=convert.pagination(len(found)))
        )

    async def trial_logs(request: Request) -> Response:
        """Determined's stream: one ``{"result": <log line>}`` a line, kept open with
        ``follow=true`` until the trial ends."""
        req = codec.query_message(request, v1.TrialLogsRequest)
        req.trial_id = codec.integer(request, "id")
        await service.get_trial(req.trial_id)  # an unknown trial: a 404 before the stream
        return codec.stream(service.trial_logs(req))

    return [
        Route("/api/v1/experiments", list_experiments, methods=["GET"]),
        Route("/api/v1/experiments", create_experiment, methods=["POST"]),
        Route("/api/v1/experiments/{id:int}", get_experiment, methods=["GET"]),
        Route("/api/v1/experiments/{id:int}", delete_experiment, methods=["DELETE"]),
        Route("/api/v1/experiments/{id:int}/trials", experiment_trials, methods=["GET"]),
        Route("/api/v1/experiments/{id:int}/checkpoints", experiment_checkpoints, methods=["GET"]),
        Route("/api/v1/experiments/{id:int}/{action:str}", experiment_action, methods=["POST"]),
        Route("/api/v1/trials/{id:int}", get_trial, methods=["GET"]),
        Route("/api/v1/trials/{id:int}/kill", kill_trial, methods=["POST"]),
        Route("/api/v1/trials/{id:int}/metrics", trial_metrics, methods=["GET"]),
        Route("/api/v1/trials/{id:int}/checkpoints", trial_checkpoints, methods=["GET"]),
        Route("/api/v1/trials/{id:int}/logs", trial_logs, methods=["GET"]),
    ]
