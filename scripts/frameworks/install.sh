#!/usr/bin/env bash
# Installs the training frameworks (scripts/frameworks/requirements.txt) into .venv, after
# scripts/setup.sh. Every distribution already in .venv is held at its installed version
# (a constraints file made from `pip freeze`), so installing a framework can never replace
# torch 2.13.0+cpu, numpy, protobuf, grpcio or betterproto2: a framework that needs another
# version of one of them fails to resolve here instead. Idempotent: quick when
# requirements.txt has not changed since the last install.
#
#   scripts/frameworks/install.sh [--dry-run]
set -euo pipefail
cd "$(dirname "$0")/../.."

dry_run=()
[ "${1:-}" = "--dry-run" ] && dry_run=(--dry-run)
py=.venv/bin/python
if [ ! -x "$py" ]; then
  echo "install.sh: no .venv here; run scripts/setup.sh first" >&2
  exit 1
fi
reqs=scripts/frameworks/requirements.txt
stamp=.venv/.pydet-frameworks-installed
want=$(sha256sum "$reqs" | cut -d' ' -f1)
if [ ${#dry_run[@]} -eq 0 ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  exit 0
fi
constraints=$(mktemp)
trap 'rm -f "$constraints"' EXIT
# Only NAME==VERSION lines: the editable install of pydet itself is not a constraint.
"$py" -m pip freeze --all | grep -E '^[A-Za-z0-9_.-]+==' > "$constraints"
"$py" -m pip install -q "${dry_run[@]}" -c "$constraints" -r "$reqs"
if [ ${#dry_run[@]} -eq 0 ]; then
  "$py" -m pip check >/dev/null || { "$py" -m pip check; exit 1; }
  echo "$want" > "$stamp"
fi
