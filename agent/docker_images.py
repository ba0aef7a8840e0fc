"""A task's image in the Docker engine: its labels, after pulling it when the start order
forces a pull or the engine does not have it.

The master is told before a pull starts (a ``Pulling`` event: it shows the trial PULLING
meanwhile). A pull's progress stream is read to its end; an error in it, like any other
failure here, raises ``ImageUnavailable``, whose message the runtime reports as the
container's start failure.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time

import aiodocker
import aiohttp
from aiodocker.exceptions import DockerError

from pydet.agent import docker_spec
from pydet.agent.docker_engine import LONG_TIMEOUT
from pydet.agent.runtime import EventSink, Pulling, StartOrder

log = logging.getLogger(__name__)


class ImageUnavailable(Exception):
    """The image cannot be inspected or pulled; the message says why."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


async def ensure_image(
    docker: aiodocker.Docker, image: str, order: StartOrder, on_event: EventSink
) -> dict[str, str]:
    """The image's labels, after pulling it if asked to or if the engine lacks it (the
    master is told first: it shows the trial PULLING meanwhile)."""

    def pulling() -> None:
        on_event(Pulling(order.container_id, order.allocation_id, image, time.time()))

    if order.spec.force_pull:
        pulling()
        try:
            await pull(docker, image, order.spec.registry_auth)
        except ImageUnavailable as e:
            raise ImageUnavailable(f"image {image} could not be pulled: {e.message}") from e
    try:
        info = await docker.images.inspect(image)
    except DockerError as e:
        if e.status != 404:
            raise ImageUnavailable(f"cannot inspect image {image}: {e.message}") from e
        pulling()
        try:
            await pull(docker, image, order.spec.registry_auth)
            info = await docker.images.inspect(image)
        except (ImageUnavailable, DockerError) as e2:
            detail = e2.message
            raise ImageUnavailable(
                f"image {image} is not present and could not be pulled: {detail}"
            ) from e2
    labels = (info.get("Config") or {}).get("Labels") or {}
    return {str(k): str(v) for k, v in labels.items()}


async def pull(docker: aiodocker.Docker, image: str, registry_auth: str) -> None:
    """Pull ``image`` (with the order's registry credentials, if any) to the end."""
    try:
        auth = docker_spec.registry_auth_header(registry_auth)
    except ValueError as e:
        raise ImageUnavailable(f"registry_auth is not usable: {e}") from e
    name, tag = docker_spec.split_image(image)
    params = {"fromImage": name, **({"tag": tag} if tag else {})}
    headers = {"X-Registry-Auth": auth} if auth else None
    log.info("pulling image %s", image)
    try:
        async with docker._query(
            "images/create", "POST", params=params, headers=headers, timeout=LONG_TIMEOUT
        ) as resp:
            async for raw in resp.content:
                with contextlib.suppress(ValueError):
                    item = json.loads(raw)
                    if isinstance(item, dict) and item.get("error"):
                        raise ImageUnavailable(str(item["error"]))
    except DockerError as e:
        raise ImageUnavailable(e.message) from e
    except aiohttp.ClientError as e:
        raise ImageUnavailable(f"the engine stopped answering: {e}") from e
