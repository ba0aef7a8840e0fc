#!/usr/bin/env bash
# The WebUI's tooling.
#   scripts/webui.sh build     npm ci + type check + vite build into master/gateway/webui, the
#                              master's package data (skipped when nothing in webui/ changed
#                              since the last build)
#   scripts/webui.sh watch DIR a development build into DIR, rebuilt on every change, for
#                              `det-master --webui-dir DIR`
#   scripts/webui.sh test      the SPA's unit tests (vitest) and its strict type check
#   scripts/webui.sh browser   Debian's Chromium and Playwright for Python, for tests/webui
#                              (Playwright's own browser download is impossible here)
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=master/gateway/webui
PYTHON=${PYTHON:-python3}
if [ -x .venv/bin/python ]; then
  PYTHON=.venv/bin/python
fi

need_npm() {
  if ! command -v npm >/dev/null; then
    echo "webui.sh: npm is needed to build the WebUI (install Node.js 20+ with npm)" >&2
    exit 1
  fi
}

sources_hash() {
  find webui -path webui/node_modules -prune -o -type f -print \
    | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -d' ' -f1
}

install_deps() {
  need_npm
  local want
  want=$(sha256sum webui/package-lock.json | cut -d' ' -f1)
  if [ "$(cat webui/node_modules/.pydet-installed 2>/dev/null)" != "$want" ]; then
    (cd webui && npm ci --no-audit --no-fund --loglevel=error)
    echo "$want" > webui/node_modules/.pydet-installed
  fi
}

build() {
  local want
  want=$(sources_hash)
  if [ -f $OUT/index.html ] && [ "$(cat $OUT/.pydet-built 2>/dev/null)" = "$want" ]; then
    return
  fi
  install_deps
  (cd webui && npm run --silent build)
  echo "$want" > $OUT/.pydet-built
}

watch() {
  if [ -z "${1:-}" ]; then
    echo "usage: scripts/webui.sh watch DIR" >&2
    exit 2
  fi
  local dir
  dir=$(mkdir -p "$1" && cd "$1" && pwd)
  install_deps
  echo "webui.sh: building into $dir on every change; serve it with det-master --webui-dir $dir" >&2
  (cd webui && npx vite build --watch --outDir "$dir" --emptyOutDir)
}

unit_tests() {
  install_deps
  (cd webui && npm run --silent typecheck && npm test --silent)
}

browser() {
  if [ ! -x /usr/bin/chromium ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq chromium >/dev/null
  fi
  if ! "$PYTHON" -c "import playwright" 2>/dev/null; then
    "$PYTHON" -m pip install -q "playwright>=1.45"
  fi
}

case "${1:-}" in
  build) build ;;
  watch) watch "${2:-}" ;;
  test) unit_tests ;;
  browser) browser ;;
  *)
    echo "usage: scripts/webui.sh build|watch DIR|test|browser" >&2
    exit 2
    ;;
esac
