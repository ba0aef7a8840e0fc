#!/usr/bin/env bash
# A throw-away PostgreSQL cluster under DIR: initdb, listening on 127.0.0.1 on a free port
# (and a unix socket in DIR), a database "pydet" owned by a user "pydet" whose password is
# in DIR/password. Prints the master's db settings as YAML. Stop it with stop.sh DIR.
# On a DIR it already set up (stopped by stop.sh), it starts that cluster again, on the same
# port, with its databases and password: a restart, as a master sees one.
set -euo pipefail
dir=${1:?usage: start.sh DIR}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
bin=
for d in /usr/lib/postgresql/*/bin; do [ -x "$d/initdb" ] && bin=$d; done
[ -n "$bin" ] || { echo "start.sh: no PostgreSQL; run scripts/postgres/install.sh" >&2; exit 1; }

# PostgreSQL refuses to run as root: the cluster belongs to the postgres user then.
as=()
owner=$(id -un)
if [ "$(id -u)" = 0 ]; then
  id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
  owner=postgres
  as=(runuser -u postgres --)
fi

if [ -f "$dir/port" ] && [ -f "$dir/data/PG_VERSION" ]; then
  port=$(cat "$dir/port")
  password=$(cat "$dir/password")
  "${as[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w -t 60 start >/dev/null \
    || { cat "$dir/postgres.log" >&2; exit 1; }
else
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  password=$(python3 -c 'import secrets; print(secrets.token_hex(16))')
  printf '%s\n' "$password" >"$dir/password"
  chmod 600 "$dir/password"
  mkdir -p "$dir/data"
  chown "$owner" "$dir" "$dir/data"
  chmod 700 "$dir/data"

  "${as[@]}" "$bin/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --no-locale >"$dir/initdb.log" 2>&1 \
    || { cat "$dir/initdb.log" >&2; exit 1; }
  cat >>"$dir/data/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$dir'
fsync = off
CONF
  # Local socket: trust (the script's own setup); TCP: the password.
  cat >"$dir/data/pg_hba.conf" <<CONF
local all all trust
host all all 127.0.0.1/32 scram-sha-256
CONF
  "${as[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w -t 60 start >/dev/null \
    || { cat "$dir/postgres.log" >&2; exit 1; }
  timeout 30 "${as[@]}" "$bin/psql" -q -h "$dir" -p "$port" -U postgres -d postgres -v ON_ERROR_STOP=1 \
    -c "CREATE USER pydet PASSWORD '$password'" -c "CREATE DATABASE pydet OWNER pydet" >/dev/null
  echo "$port" >"$dir/port"
fi
cat <<YAML
db:
  type: postgres
  host: 127.0.0.1
  port: $port
  name: pydet
  user: pydet
  password_file: $dir/password
YAML
