#!/usr/bin/env bash
# Builds the images the docker runtime uses, without any image registry:
#
#   pydet-base:trixie    a minimal Debian with python3, venv and pip, made with debootstrap
#                        and `docker import`; cached: skipped when the engine has it,
#                        re-imported from $PYDET_IMAGE_CACHE/pydet-base-<suite>.tar.gz when
#                        the engine lost it but the tarball is there. The suite is trixie
#                        (Python 3.13): bookworm's Python 3.11.2 predates tarfile's
#                        extraction filters (3.11.4), which the harness uses to unpack the
#                        experiment's context. PYDET_DEBIAN_SUITE picks another.
#   pydet-task:latest    the top-level Dockerfile: master, agent and the `determined`
#                        harness installed from this checkout (pip reaches PyPI through
#                        `docker build --network host`). The agent's default task image.
#
# torch is not in these images (they stay small): images for torch work come from the
# user, with the harness mounted (README.md, "Docker").
#
# Needs a running engine (scripts/docker/install.sh) and root for debootstrap. A cold
# build takes 5-10 minutes; one with nothing changed about a second.
set -euo pipefail
cd "$(dirname "$0")/../.."

SUITE=${PYDET_DEBIAN_SUITE:-trixie}
BASE=${PYDET_BASE_IMAGE:-pydet-base:$SUITE}
TASK=${PYDET_TASK_IMAGE:-pydet-task:latest}
CACHE=${PYDET_IMAGE_CACHE:-/var/cache/pydet-images}
MIRROR=${PYDET_DEBIAN_MIRROR:-http://deb.debian.org/debian}

say() { echo "build-images.sh: $*" >&2; }

if ! docker info >/dev/null 2>&1; then
  say "no Docker engine answers; run scripts/docker/install.sh first"
  exit 1
fi

build_base() {
  local tarball="$CACHE/pydet-base-$SUITE.tar.gz"
  if [ ! -s "$tarball" ]; then
    if [ "$(id -u)" != 0 ]; then
      say "debootstrap needs root; run this script as root"
      exit 1
    fi
    command -v debootstrap >/dev/null || { say "debootstrap is missing (scripts/docker/install.sh installs it)"; exit 1; }
    mkdir -p "$CACHE"
    local rootfs
    rootfs=$(mktemp -d "$CACHE/rootfs.XXXXXX")
    trap 'rm -rf "$rootfs"' EXIT
    say "debootstrapping Debian $SUITE with python3 into $rootfs (takes a few minutes)"
    debootstrap --variant=minbase \
      --include=python3,python3-venv,python3-pip,ca-certificates,procps \
      "$SUITE" "$rootfs" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 || {
        say "debootstrap failed; last lines of $CACHE/debootstrap.log:"; tail -n 20 "$CACHE/debootstrap.log" >&2; exit 1; }
    # What an image does not need: package lists, caches, docs.
    rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin \
      "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/*
    tar -C "$rootfs" --numeric-owner -czf "$tarball.tmp" .
    mv "$tarball.tmp" "$tarball"
    rm -rf "$rootfs"
    trap - EXIT
  fi
  say "importing $tarball as $BASE"
  docker import \
    -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    -c 'ENV LANG=C.UTF-8' \
    -c 'CMD ["/bin/bash"]' \
    "$tarball" "$BASE" >/dev/null
}

mkdir -p "$CACHE"
# One build at a time (a test run may start one while another is under way).
exec 9>"$CACHE/.lock"
flock 9

start=$(date +%s)
if docker image inspect "$BASE" >/dev/null 2>&1; then
  say "$BASE is present (cached)"
else
  build_base
fi

say "building $TASK from ./Dockerfile"
# The context is only what the Dockerfile copies (the checkout's .venv or node_modules can be
# gigabytes), plus this host's own CA certificates: where HTTPS goes through an intercepting
# proxy, pip inside the build must trust the same authorities as pip here.
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
tar -c --exclude=__pycache__ --exclude='*.pyc' --exclude='*.egg-info' \
    Dockerfile pyproject.toml README.md master agent cli harness scripts/docker/ca-certificates \
  | tar -x -C "$ctx"
for crt in ${PYDET_EXTRA_CA_DIR:-/usr/local/share/ca-certificates}/*.crt; do
  if [ -f "$crt" ]; then cp "$crt" "$ctx/scripts/docker/ca-certificates/"; fi
done
docker build --network host --build-arg "BASE=$BASE" -t "$TASK" -f "$ctx/Dockerfile" "$ctx" >&2
rm -rf "$ctx"
trap - EXIT

say "done in $(( $(date +%s) - start ))s: $(docker image ls --format '{{.Repository}}:{{.Tag}} {{.Size}}' | grep -E "^(${BASE%:*}|${TASK%:*}):" | tr '\n' ' ')"
