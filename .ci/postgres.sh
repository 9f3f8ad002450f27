#!/usr/bin/env bash
# Start a throwaway PostgreSQL server for flashtune's cache tests and print the URL to use:
#
#     eval "$(bash .ci/postgres.sh [PYTHON])"     # sets FLASHTUNE_TEST_PG_URL
#
# Installs Debian's postgresql (apt) if it is missing and psycopg2-binary into the venv of
# PYTHON (default: `python` on PATH), then runs a server on 127.0.0.1 from a data folder under
# $FLASHTUNE_PG_DIR (default /tmp/flashtune-pg). Idempotent: a second run reuses the server.
# Only the export line goes to stdout; progress and errors go to stderr; any failure exits
# non-zero with the reason.
set -euo pipefail

PY="${1:-python}"
PGDIR="${FLASHTUNE_PG_DIR:-/tmp/flashtune-pg}"
PORT="${FLASHTUNE_PG_PORT:-54329}"
DB="${FLASHTUNE_PG_DB:-flashtune_test}"

say() { echo "postgres.sh: $*" >&2; }
fail() { say "FAILED: $*"; exit 1; }
trap 'say "FAILED at line $LINENO: $BASH_COMMAND (exit $?)"' ERR

[[ "$DB" =~ ^[a-z_][a-z0-9_]*$ ]] || fail "FLASHTUNE_PG_DB must be a plain lower-case identifier, got '$DB'"
[[ "$PORT" =~ ^[0-9]+$ ]] || fail "FLASHTUNE_PG_PORT must be a number, got '$PORT'"
command -v "$PY" >/dev/null 2>&1 || fail "python '$PY' not found (pass the venv's python as \$1)"

find_bindir() {
    local dir
    dir="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
    if [[ -n "$dir" && -x "$dir/initdb" ]]; then echo "$dir"; fi
}

BINDIR="$(find_bindir)"
if [[ -z "$BINDIR" ]]; then
    [[ "$(id -u)" == 0 ]] || fail "postgresql is not installed and apt needs root"
    say "installing postgresql with apt"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2 || fail "apt-get update failed"
    apt-get install -y -qq postgresql >&2 || fail "apt-get install postgresql failed"
    BINDIR="$(find_bindir)"
    [[ -n "$BINDIR" ]] || fail "postgresql installed but no initdb under /usr/lib/postgresql/*/bin"
fi

if ! "$PY" -c "import psycopg2" >/dev/null 2>&1; then
    say "installing psycopg2-binary into $("$PY" -c 'import sys; print(sys.prefix)')"
    "$PY" -m pip install -q psycopg2-binary >&2 || fail "pip install psycopg2-binary failed"
fi

# initdb and postgres refuse to run as root: run them as the 'postgres' user then.
as_pg() {
    if [[ "$(id -u)" == 0 ]]; then
        id postgres >/dev/null 2>&1 || fail "running as root but there is no 'postgres' user"
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

mkdir -p "$PGDIR"
if [[ "$(id -u)" == 0 ]]; then chown postgres "$PGDIR"; fi
DATA="$PGDIR/data"
if [[ ! -f "$DATA/PG_VERSION" ]]; then
    say "initdb in $DATA"
    as_pg "$BINDIR/initdb" -D "$DATA" -U postgres --auth=trust -E UTF8 >"$PGDIR/initdb.log" 2>&1 \
        || { cat "$PGDIR/initdb.log" >&2; fail "initdb failed"; }
fi

if as_pg "$BINDIR/pg_ctl" -D "$DATA" status >/dev/null 2>&1; then
    say "server already running in $DATA"
else
    say "starting server on 127.0.0.1:$PORT"
    # unix socket in the data folder's parent: /var/run/postgresql may not exist or be ours
    as_pg "$BINDIR/pg_ctl" -D "$DATA" -l "$PGDIR/server.log" -w -t 60 \
        -o "-c listen_addresses=127.0.0.1 -p $PORT -k $PGDIR -c fsync=off" start >&2 \
        || { tail -n 20 "$PGDIR/server.log" >&2 || true; fail "pg_ctl start failed"; }
fi

PSQL=("$BINDIR/psql" -h 127.0.0.1 -p "$PORT" -U postgres -v ON_ERROR_STOP=1 -qtA)
exists="$("${PSQL[@]}" -d postgres -c "SELECT 1 FROM pg_database WHERE datname = '$DB'")" \
    || fail "cannot connect to the server on 127.0.0.1:$PORT (see $PGDIR/server.log)"
if [[ "$exists" != "1" ]]; then
    "${PSQL[@]}" -d postgres -c "CREATE DATABASE $DB" >&2 || fail "CREATE DATABASE $DB failed"
fi

"$PY" - "$PORT" "$DB" >&2 <<'PYCHECK' || fail "psycopg2 cannot connect to the new server"
import sys
import psycopg2
psycopg2.connect(host="127.0.0.1", port=int(sys.argv[1]), user="postgres", dbname=sys.argv[2]).close()
PYCHECK

say "ready"
echo "export FLASHTUNE_TEST_PG_URL=postgresql+psycopg2://postgres@127.0.0.1:$PORT/$DB"
