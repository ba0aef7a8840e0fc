#!/usr/bin/env bash
# Stops the cluster start.sh DIR started (fast shutdown; bounded wait).
set -euo pipefail
dir=${1:?usage: stop.sh DIR}
[ -f "$dir/data/postmaster.pid" ] || exit 0
bin=
for d in /usr/lib/postgresql/*/bin; do [ -x "$d/pg_ctl" ] && bin=$d; done
as=()
[ "$(id -u)" = 0 ] && as=(runuser -u postgres --)
"${as[@]}" "$bin/pg_ctl" -D "$dir/data" -m fast -w -t 30 stop >/dev/null
