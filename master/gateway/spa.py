"""The WebUI: the built single-page app, and ``index.html`` for every other path so that a
client-side route (``/experiments/3``) survives a reload.

The build ships inside this package (``webui/``, written by ``scripts/webui.sh build`` and
carried in the wheel as package data), found through the import system so that a checkout
and an installed wheel serve the same files. ``det-master --webui-dir DIR`` serves a
development build from DIR instead.
"""

from __future__ import annotations

import importlib.resources
import pathlib

from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, Response
from starlette.routing import Route

from pydet.master.gateway import codec

_NOT_BUILT = (
    "<!doctype html><title>pydet</title><h1>pydet master</h1>"
    "<p>The WebUI is not built (run <code>scripts/webui.sh build</code>); the JSON API is at "
    "<a href='/api/v1/experiments'>/api/v1/experiments</a>.</p>"
)
_NO_DEV_BUILD = (
    "<!doctype html><title>pydet</title><h1>pydet master</h1>"
    "<p>No <code>index.html</code> in the WebUI directory given with <code>--webui-dir</code> "
    "yet (is <code>scripts/webui.sh watch DIR</code> building into it?); reload once it is "
    "there.</p>"
)

# Vite puts a content hash in every asset's name: safe to cache for good.
_IMMUTABLE = {"Cache-Control": "public, max-age=31536000, immutable"}


def packaged_build() -> pathlib.Path:
    """The build that ships in this package (possibly not built yet, in a checkout)."""
    root = importlib.resources.files("pydet.master.gateway").joinpath("webui")
    # pip installs wheels as plain files (never zipped), so the package data is a directory.
    if not isinstance(root, pathlib.Path):
        raise RuntimeError(f"pydet's package data is not on a filesystem: {root}")
    return root


def routes(dev_build: pathlib.Path | None = None) -> list[Route]:
    root = (dev_build or packaged_build()).resolve()
    missing = _NO_DEV_BUILD if dev_build is not None else _NOT_BUILT

    def index() -> Response:
        page = root / "index.html"
        if page.is_file():
            return FileResponse(page, headers={"Cache-Control": "no-cache"})
        return HTMLResponse(missing)

    async def serve(request: Request) -> Response:
        path = str(request.path_params.get("path", ""))
        if path == "api" or path.startswith("api/"):
            return codec.error(f"no API route {request.url.path}", 404, "NOT_FOUND")
        if path:
            candidate = (root / path).resolve()
            if candidate.is_relative_to(root) and candidate.is_file():
                headers = _IMMUTABLE if path.startswith("assets/") else None
                return FileResponse(candidate, headers=headers)
            # A missing file (a stale asset name, a typo'd icon) is a 404, not the app.
            if "." in path.rsplit("/", 1)[-1]:
                return codec.error(f"no file {request.url.path}", 404, "NOT_FOUND")
        return index()

    return [Route("/{path:path}", serve, methods=["GET", "HEAD"])]
