#!/usr/bin/env bash
# The integration suite's non-slow tests with every master's store on PostgreSQL (CI's
# postgres-integration step): starts a throw-away PostgreSQL in a temporary directory (each
# test's master gets a database of its own there, tests/cluster.py), runs the tests, and
# stops it again whatever they did. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/../.."
scripts/postgres/install.sh
dir=$(mktemp -d /tmp/pydet-pg-integration-XXXXXX)
chmod 755 "$dir"  # the postgres user owns the cluster when this runs as root
cleanup() {
  scripts/postgres/stop.sh "$dir" || true
  rm -rf "$dir"
}
trap cleanup EXIT
scripts/postgres/start.sh "$dir" >/dev/null
PYDET_TEST_POSTGRES="$dir" pytest tests/integration \
  -m "not slow and not docker and not webui and not slurm" -q -p no:cacheprovider "$@"
