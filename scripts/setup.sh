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
  # With the notebook extra: `det notebook start` runs JupyterLab in this Python
  # (TensorBoard, for `det tensorboard start`, is a dependency of pydet itself).
  .venv/bin/python -m pip install -q -e ".[dev,notebook]"
  # DeepSpeed ships as an sdist whose build imports torch: build it against the torch above
  # instead of an isolated build environment (which would fetch another torch).
  .venv/bin/python -m pip install -q --no-build-isolation "deepspeed==0.19.8"
  echo "$want" > "$stamp"
fi
# `det shell` runs OpenSSH's sshd in the task, found in /usr/sbin: Debian's, when missing and
# root (or password-less sudo) can install it; otherwise one line says what to do.
if ! command -v sshd >/dev/null 2>&1 && [ ! -x /usr/sbin/sshd ]; then
  if command -v apt-get >/dev/null 2>&1 && { [ "$(id -u)" = 0 ] || sudo -n true 2>/dev/null; }; then
    as_root=$([ "$(id -u)" = 0 ] || echo "sudo -n")
    $as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssh-server >/dev/null \
      || { $as_root apt-get update -qq && $as_root env DEBIAN_FRONTEND=noninteractive \
             apt-get install -y -qq openssh-server >/dev/null; }
  else
    echo "setup.sh: det shell needs OpenSSH's sshd where agents run tasks; install it as root" \
      "(Debian/Ubuntu: apt-get install openssh-server)" >&2
  fi
fi
# The WebUI's static files, served by the master (quick when webui/ has not changed).
scripts/webui.sh build
