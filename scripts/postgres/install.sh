#!/usr/bin/env bash
# PostgreSQL from Debian's package, for the store's tests against PostgreSQL
# (tests/postgres/, CI's postgres step). Idempotent: does nothing when initdb is there.
set -euo pipefail

bindir() {
  local d
  for d in /usr/lib/postgresql/*/bin; do
    [ -x "$d/initdb" ] && { echo "$d"; return 0; }
  done
  return 1
}

if bindir >/dev/null; then
  echo "postgresql: $(bindir)"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "install.sh: postgresql is missing and installing it needs root" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
timeout 300 apt-get update -q
timeout 600 apt-get install -y -q --no-install-recommends postgresql
echo "postgresql: $(bindir)"
