#!/usr/bin/env bash
# Makes a Docker engine available on this machine for the docker runtime and its tests.
#
# Idempotent: when `docker info` already answers it does nothing. Otherwise it installs
# Debian's docker.io and debootstrap (when missing) and starts dockerd in the background
# with host networking only (--bridge=none --iptables=false: no bridge, no NAT rules, no
# private address ranges) and its data under $PYDET_DOCKER_ROOT, then waits for the socket.
#
# The storage driver is overlay2 when this kernel lets us mount an overlay (much faster
# container starts: vfs copies the whole image for every container), else vfs. The choice
# is remembered in the data root, because images stored by one driver are invisible to the
# other and the cached base image must survive. PYDET_DOCKER_STORAGE_DRIVER forces one.
set -euo pipefail

ROOT=${PYDET_DOCKER_ROOT:-/var/lib/pydet-docker}
SOCK=${PYDET_DOCKER_SOCK:-/var/run/docker.sock}
LOG=${PYDET_DOCKER_LOG:-/var/log/pydet-dockerd.log}
WAIT=${PYDET_DOCKER_WAIT:-60}

say() { echo "install.sh: $*" >&2; }

engine_up() { DOCKER_HOST="unix://$SOCK" docker info >/dev/null 2>&1; }

if command -v docker >/dev/null 2>&1 && engine_up; then
  say "a Docker engine already answers on $SOCK"
  exit 0
fi

if [ "$(id -u)" != 0 ]; then
  say "starting a Docker engine needs root (apt-get, dockerd); run this script as root"
  exit 1
fi

missing=()
command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
if [ ${#missing[@]} -gt 0 ]; then
  say "installing ${missing[*]} from Debian"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
fi

mkdir -p "$ROOT"
driver=${PYDET_DOCKER_STORAGE_DRIVER:-$(cat "$ROOT/.storage-driver" 2>/dev/null || true)}
if [ -z "$driver" ]; then
  probe=$(mktemp -d "$ROOT/.overlay-probe.XXXXXX")
  mkdir -p "$probe"/{lower,upper,work,merged}
  if mount -t overlay overlay \
      -o "lowerdir=$probe/lower,upperdir=$probe/upper,workdir=$probe/work" "$probe/merged" \
      2>/dev/null; then
    umount "$probe/merged"
    driver=overlay2
  else
    driver=vfs
  fi
  rm -rf "$probe"
fi
echo "$driver" > "$ROOT/.storage-driver"

# containerd and dockerd may be left from an earlier run that lost its socket.
if [ -f "$ROOT/dockerd.pid" ] && kill -0 "$(cat "$ROOT/dockerd.pid")" 2>/dev/null; then
  say "dockerd (pid $(cat "$ROOT/dockerd.pid")) runs but does not answer yet; waiting"
else
  rm -f "$SOCK"
  say "starting dockerd (storage driver $driver, data root $ROOT, log $LOG)"
  nohup dockerd \
    --host "unix://$SOCK" \
    --data-root "$ROOT" \
    --exec-root "$ROOT/exec" \
    --pidfile "$ROOT/dockerd.pid" \
    --storage-driver "$driver" \
    --iptables=false \
    --ip-masq=false \
    --bridge=none \
    >>"$LOG" 2>&1 </dev/null &
fi

for _ in $(seq "$WAIT"); do
  if engine_up; then
    say "Docker engine ready on $SOCK ($(docker version --format '{{.Server.Version}}' 2>/dev/null))"
    exit 0
  fi
  sleep 1
done
say "dockerd did not answer on $SOCK within ${WAIT}s; last lines of $LOG:"
tail -n 20 "$LOG" >&2 || true
exit 1
