#!/usr/bin/env bash
# The test command: static checks, then the default test suite
# (no slow, docker, webui, slurm or postgres suites).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
. .venv/bin/activate
python api/generate.py --check
ruff check .
ruff format --check .
mypy
lint-imports --no-cache
scripts/webui.sh test
pytest -m "not slow and not docker and not webui and not slurm and not postgres and not frameworks" -p no:cacheprovider "$@"
