#!/usr/bin/env bash
# pydet as a user gets it: builds the WebUI, the sdist and from it the wheel (checked to
# be the one the checkout builds), installs the wheel into a fresh virtual environment
# outside the checkout, and from an empty directory (no PYTHONPATH, nothing of the checkout
# importable) starts a local cluster, runs examples/minimal to COMPLETED, and fetches the
# WebUI's index page and one of its assets.
# Everything it made is removed at the end.
#
#   scripts/check-wheel.sh [CLUSTER-UP FLAGS]   e.g. --runtime docker (builds pydet-task from
#                                               the installed wheel when missing)
set -euo pipefail
cd "$(dirname "$0")/.."
checkout=$PWD

PYTHON=${PYTHON:-python3}
if [ -x .venv/bin/python ]; then
  PYTHON=.venv/bin/python
fi
say() { echo "check-wheel.sh: $*" >&2; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/pydet-check-wheel.XXXXXX")
case "$tmp" in
  "$checkout"/*) say "the temporary directory $tmp is inside the checkout"; exit 1 ;;
esac
venv=$tmp/venv
data=$tmp/data
work=$tmp/work
cleanup() {
  local code=$?
  if [ -x "$venv/bin/det" ] && [ -d "$data" ]; then
    (cd "$work" && "$venv/bin/det" deploy local cluster-down --data-dir "$data") || code=1
  fi
  if [ "$code" -ne 0 ] && [ -d "$data" ]; then
    for log in "$data"/*.log; do
      [ -f "$log" ] && { echo "--- $log (last lines)"; tail -n 30 "$log"; }
    done >&2
  fi
  rm -rf "$tmp"
  exit "$code"
}
trap cleanup EXIT

say "building the WebUI, then the sdist and the wheel (python -m build)"
scripts/webui.sh build
"$PYTHON" -m build --outdir "$tmp/dist" . >"$tmp/build.log" 2>&1 || {
  tail -n 30 "$tmp/build.log" >&2
  say "python -m build failed (is the dev extra installed? scripts/setup.sh)"
  exit 1
}
wheel=$(ls "$tmp"/dist/pydet-*.whl)
ls "$tmp"/dist/pydet-*.tar.gz >/dev/null
# That wheel came from the sdist: it must be the one the checkout builds.
"$PYTHON" -m build --wheel --outdir "$tmp/direct" . >"$tmp/build.log" 2>&1 || {
  tail -n 30 "$tmp/build.log" >&2
  exit 1
}
"$PYTHON" - "$wheel" "$tmp"/direct/pydet-*.whl <<'EOF'
import sys
import zipfile


def contents(path):
    return {i.filename: i.CRC for i in zipfile.ZipFile(path).infolist() if "RECORD" not in i.filename}


from_sdist, direct = (contents(p) for p in sys.argv[1:])
assert from_sdist == direct, sorted(set(from_sdist.items()) ^ set(direct.items()))
EOF

say "installing $(basename "$wheel") into a fresh virtual environment in $venv"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q "$wheel" >"$tmp/install.log" 2>&1 || {
  tail -n 30 "$tmp/install.log" >&2
  say "pip install $wheel failed"
  exit 1
}

mkdir -p "$work" "$data"
cd "$work"
unset PYTHONPATH VIRTUAL_ENV
export PATH="$venv/bin:$PATH" XDG_CONFIG_HOME="$tmp/config"

# The installed copy, nothing of the checkout; and no torch pulled in by anything.
python - "$venv" "$checkout" <<'EOF'
import importlib.util
import pathlib
import sys

venv, checkout = (pathlib.Path(p).resolve() for p in sys.argv[1:])
import determined
import pydet
import pydet.master.gateway.spa as spa

for module in (pydet, determined):
    where = pathlib.Path(module.__file__).resolve()
    assert where.is_relative_to(venv), f"{module.__name__} imports from {where}, not {venv}"
    assert not where.is_relative_to(checkout), f"{module.__name__} imports from the checkout"
assert (spa.packaged_build() / "index.html").is_file(), "the wheel has no WebUI"
assert importlib.util.find_spec("torch") is None, "installing the wheel pulled torch"
print(f"pydet and determined import from {venv}", file=sys.stderr)
EOF
for script in det det-master det-agent; do
  [ -x "$venv/bin/$script" ] || { say "the wheel installed no $script console script"; exit 1; }
done

port=$(python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
det deploy local cluster-up --master-port "$port" --data-dir "$data" "$@"
export DET_MASTER=localhost:$port

cp -r "$checkout/examples/minimal" "$work/minimal"
det experiment create minimal/const.yaml minimal --follow-first-trial | tee "$tmp/follow.log"
grep -q "finished with state COMPLETED" "$tmp/follow.log"

python - "$port" <<'EOF'
import re
import sys
import urllib.request

import pydet.master.gateway.spa as spa

base = f"http://127.0.0.1:{sys.argv[1]}"
with urllib.request.urlopen(f"{base}/experiments", timeout=10) as resp:
    page = resp.read()
# The packaged index page itself, also for a client-side route.
assert page == (spa.packaged_build() / "index.html").read_bytes(), page[:300]
assets = re.findall(rb'(?:src|href)="/(assets/[^"]+\.(?:js|css))"', page)
assert assets, f"the index page names no asset: {page[:300]!r}"
with urllib.request.urlopen(f"{base}/{assets[0].decode()}", timeout=10) as resp:
    body = resp.read()
    assert resp.headers["Content-Type"].split(";")[0] in ("text/javascript", "text/css")
assert body == (spa.packaged_build() / assets[0].decode()).read_bytes()
print(f"the WebUI's index page and /{assets[0].decode()} ({len(body)} bytes) are served")
EOF
say "OK: the wheel installs, runs examples/minimal to COMPLETED and serves the WebUI"
