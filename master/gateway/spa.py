"""The built WebUI: files from ``webui/dist``, and ``index.html`` for every other path so
that a client-side route (``/experiments/3``) survives a reload."""

from __future__ import annotations

import pathlib

from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, Response
from starlette.routing import Route

WEBUI_DIST = pathlib.Path(__file__).resolve().parents[2] / "webui" / "dist"

_NOT_BUILT = (
    "<!doctype html><title>pydet</title><h1>pydet master</h1>"
    "<p>The WebUI is not built (run <code>scripts/webui.sh build</code>); the JSON API is at "
    "<a href='/api/v1/experiments'>/api/v1/experiments</a>.</p>"
)

# Vite puts a content hash in every asset's name: safe to cache for good.
_IMMUTABLE = {"Cache-Control": "public, max-age=31536000, immutable"}


def routes(dist: pathlib.Path = WEBUI_DIST) -> list[Route]:
    root = dist.resolve()

    def index() -> Response:
        page = root / "index.html"
        if page.is_file():
            return FileResponse(page, headers={"Cache-Control": "no-cache"})
        return HTMLResponse(_NOT_BUILT)

    async def serve(request: Request) -> Response:
        path = str(request.path_params.get("path", ""))
        if path == "api" or path.startswith("api/"):
            return JSONResponse({"error": f"no API route {request.url.path}"}, status_code=404)
        if path:
            candidate = (root / path).resolve()
            if candidate.is_relative_to(root) and candidate.is_file():
                headers = _IMMUTABLE if path.startswith("assets/") else None
                return FileResponse(candidate, headers=headers)
            # A missing file (a stale asset name, a typo'd icon) is a 404, not the app.
            if "." in path.rsplit("/", 1)[-1]:
                return JSONResponse({"error": f"no file {request.url.path}"}, status_code=404)
        return index()

    return [Route("/{path:path}", serve, methods=["GET", "HEAD"])]
