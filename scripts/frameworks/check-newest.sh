#!/usr/bin/env bash
# Runs the Hugging Face part of the frameworks suite against the newest releases of the
# frameworks, in a throw-away venv, so that a release that breaks DetCallback is seen before
# the pins in requirements.txt move (CI's default run keeps using the pins).
#
# The venv sees everything .venv has (a .pth file adds .venv's site-packages, pydet
# included) and gets the newest transformers, trl, peft, accelerate and datasets of its own,
# which come first on its path; everything else .venv has is held at its version (torch
# 2.13.0 CPU never moves). Prints the versions it tested. Extra arguments go to pytest.
#
#   scripts/frameworks/check-newest.sh [-k EXPR]
set -euo pipefail
cd "$(dirname "$0")/../.."

[ -x .venv/bin/python ] || { echo "run scripts/setup.sh first (no .venv)" >&2; exit 1; }
dir=$(mktemp -d /tmp/pydet-newest-XXXXXX)
trap 'rm -rf "$dir"' EXIT
base=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
.venv/bin/python -m venv --without-pip "$dir/venv"
own=$("$dir/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "import site; site.addsitedir('$base')" > "$own/pydet-venv.pth"

newest=(transformers trl peft accelerate datasets)
# Hold every other distribution .venv has at its version (pydet's own editable line aside).
.venv/bin/python -m pip freeze --all | grep -E '^[A-Za-z0-9_.-]+==' \
  | grep -v -i -E "^($(IFS='|'; echo "${newest[*]}"))==" > "$dir/constraints.txt"
# pip from .venv, installing into the throw-away venv's own site-packages.
.venv/bin/python -m pip --python "$dir/venv/bin/python" install -q --upgrade \
  --constraint "$dir/constraints.txt" "${newest[@]}" >&2 \
  || { echo "the newest releases do not install beside pydet's pins" >&2; exit 1; }
"$dir/venv/bin/python" - <<'EOF'
import importlib.metadata as m
print("newest:", ", ".join(f"{d} {m.version(d)}" for d in ("transformers", "trl", "peft", "accelerate", "datasets")))
EOF
"$dir/venv/bin/python" -m pytest -m frameworks -q -p no:cacheprovider \
  tests/frameworks/test_hf_trainer.py tests/frameworks/test_hf_bad_input.py "$@"
