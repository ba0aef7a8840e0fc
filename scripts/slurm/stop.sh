#!/usr/bin/env bash
# Stops the cluster scripts/slurm/start.sh DIR started, and removes DIR.
# PYDET_SLURM_KEEP=1 keeps DIR (its logs, the jobcomp file) for a look afterwards.
set -euo pipefail

if [ $# -ne 1 ]; then
  echo "usage: $0 DIR" >&2
  exit 2
fi
DIR=$1
[ -d "$DIR" ] || exit 0

# slurmd first (it kills the job steps it runs), then slurmctld, then munged.
for daemon in slurmd slurmctld munged; do
  pidfile=$DIR/run/$daemon.pid
  [ -f "$pidfile" ] || continue
  pid=$(cat "$pidfile")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.2
    done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$pidfile"
done

if [ "${PYDET_SLURM_KEEP:-}" != 1 ]; then
  rm -rf "$DIR"
fi
