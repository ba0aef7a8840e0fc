#!/usr/bin/env bash
# Builds the images the docker runtime uses, pydet-base:trixie and pydet-task:latest, from
# this checkout: `python -m pydet.cli.images` (its docstring says how, and which PYDET_*
# variables change what). An installed pydet builds them the same way, from itself, when
# `det deploy local cluster-up --runtime docker` finds the default image missing.
#
# Needs a running engine (scripts/docker/install.sh) and root for debootstrap. A cold
# build takes 5-10 minutes; one with nothing changed a few seconds.
set -euo pipefail
cd "$(dirname "$0")/../.."

PYTHON=${PYTHON:-python3}
if [ -x .venv/bin/python ]; then
  PYTHON=.venv/bin/python
fi
# This checkout's code, whatever else the interpreter has installed.
PYTHONPATH="$PWD/harness${PYTHONPATH:+:$PYTHONPATH}" exec "$PYTHON" -m pydet.cli.images "$@"
