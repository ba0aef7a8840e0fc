#!/usr/bin/env bash
# A new user's first run: install, start a local cluster, run an example to completion.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
. .venv/bin/activate
det deploy local cluster-up "$@"
det experiment create examples/minimal/const.yaml examples/minimal --follow-first-trial
echo
echo "The cluster keeps running: try 'det experiment list' (after '. .venv/bin/activate')."
echo "Stop it with: det deploy local cluster-down"
