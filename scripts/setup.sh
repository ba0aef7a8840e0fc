#!/usr/bin/env bash
# Installs everything pydet needs into ./.venv (idempotent; quick when nothing changed).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.pydet-installed
want=$(cat pyproject.toml | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  .venv/bin/python -m pip install -q --upgrade pip
  # torch first, pinned: anything that depends on it must find it already satisfied,
  # or pip would download a CUDA build of several GB.
  .venv/bin/python -m pip install -q "torch==2.13.0"
  .venv/bin/python -m pip install -q -e ".[dev]"
  # DeepSpeed ships as an sdist whose build imports torch: build it against the torch above
  # instead of an isolated build environment (which would fetch another torch).
  .venv/bin/python -m pip install -q --no-build-isolation "deepspeed==0.19.8"
  echo "$want" > "$stamp"
fi
# The WebUI's static files, served by the master (quick when webui/ has not changed).
scripts/webui.sh build
