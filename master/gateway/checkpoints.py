"""A checkpoint's files through the master: Determined's ``GET /checkpoints/UUID``, what the
SDK's ``Checkpoint.download(mode=DownloadMode.MASTER)`` reads (and ``AUTO`` when this
machine cannot read the checkpoint storage itself).

The answer is a gzip'd tar of the files (``Accept: application/zip`` asks for a zip). Any
user may read any checkpoint, as ``GetCheckpoint`` says.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import IO

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from determined.api.gen import v1
from pydet.master.gateway import auth as gateway_auth
from pydet.master.service import Service

_CHUNK = 1 << 20


async def _chunks(archive: IO[bytes]) -> AsyncIterator[bytes]:
    try:
        while chunk := archive.read(_CHUNK):
            yield chunk
    finally:
        archive.close()


def routes(service: Service) -> list[Route]:
    async def download(request: Request) -> Response:
        uuid = request.path_params["uuid"]
        await gateway_auth.authorize(request, "GetCheckpoint", v1.GetCheckpointRequest(uuid=uuid))
        zipped = "application/zip" in request.headers.get("accept", "")
        archive = await service.checkpoints.archive(uuid, zipped=zipped)
        kind, suffix = ("application/zip", "zip") if zipped else ("application/gzip", "tar.gz")
        return StreamingResponse(
            _chunks(archive),
            media_type=kind,
            headers={"Content-Disposition": f'attachment; filename="{uuid}.{suffix}"'},
        )

    return [Route("/checkpoints/{uuid}", download, methods=["GET"])]
