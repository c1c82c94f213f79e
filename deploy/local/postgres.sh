#!/usr/bin/env bash
# Private PostgreSQL 15 cluster for tests, `make run` and benchmarks.
#
#   postgres.sh start   -> prints DATABASE_URL=... (last line), writes it to $RUN/url
#   postgres.sh stop    -> fast shutdown, no orphan postgres left behind
#   postgres.sh status
#   postgres.sh restart -> fast restart on the same port (fault-injection tests)
#
# The cluster lives under $QUEEN_LOCAL_DIR/pg (git-ignored). It is owned by the
# `postgres` OS user because initdb refuses to run as root. A run killed midway
# leaves a postmaster.pid behind; `start` stops a still-running old server of
# ours (same data dir) or discards the stale file, so the next run recovers.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
# Canonical path: pg_ctl canonicalises -D, and running_pid() matches it in /proc cmdline.
LOCAL="$(realpath -m "${QUEEN_LOCAL_DIR:-$repo/.local}")"
PGROOT="$LOCAL/pg"
DATA="$PGROOT/data"
RUN="$PGROOT/run"
LOG="$RUN/postgres.log"
PGBIN="${PGBIN:-/usr/lib/postgresql/15/bin}"
# Extra server settings, e.g. "-c fsync=off" for throw-away test clusters.
PG_EXTRA_OPTS="${QUEEN_PG_OPTS:-}"

as_owner() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

ensure_binaries() {
  if [ ! -x "$PGBIN/pg_ctl" ]; then
    echo "postgres.sh: $PGBIN/pg_ctl missing; installing postgresql-15 from Debian" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq postgresql-15 >&2
  fi
  if ! id postgres >/dev/null 2>&1; then
    useradd --system --home-dir "$PGROOT" --shell /usr/sbin/nologin postgres
  fi
}

free_port() {
  node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'
}

running_pid() {
  # Prints the postmaster pid if a server of ours is alive on $DATA.
  local pidfile="$DATA/postmaster.pid" pid
  [ -f "$pidfile" ] || return 1
  pid="$(head -1 "$pidfile")"
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q -- "$DATA" || return 1
  echo "$pid"
}

do_stop() {
  if pid="$(running_pid)"; then
    as_owner "$PGBIN/pg_ctl" -D "$DATA" -m fast -w -t 60 stop >/dev/null || kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$DATA/postmaster.pid" "$RUN/url"
}

do_start() {
  ensure_binaries
  mkdir -p "$PGROOT" "$RUN"
  # Parents must be traversable by the postgres user.
  chmod o+x "$LOCAL" "$PGROOT" 2>/dev/null || true
  if [ "$(id -u)" = 0 ]; then chown postgres "$PGROOT" "$RUN"; fi
  # A server left by a killed run is stopped first: a clean, known state each start.
  do_stop
  if [ ! -f "$DATA/PG_VERSION" ]; then
    rm -rf "$DATA"
    as_owner "$PGBIN/initdb" -D "$DATA" -U postgres -A trust -E UTF8 --no-locale >"$RUN/initdb.log" 2>&1 \
      || { cat "$RUN/initdb.log" >&2; exit 1; }
  fi
  local port="${1:-}"
  [ -n "$port" ] || port="$(free_port)"
  # shared_buffers: as docs/operations.md tells operators, a quarter of RAM
  # (capped at 2 GB here, floor 128 MB). A duplicate's check reads its
  # log_txns row (~32 B per stored message: 160 MB at 5 M); with the 256 MB
  # this used to be, nearly every such read at 5 M stored came from the OS
  # page cache while the blob writes churned the buffers (docs/deduplication.md,
  # "What is left at 5 M stored"). Every benchmark's baseline runs on the same
  # server, so each compares against a PostgreSQL configured the same way.
  local mem_kb sb_mb
  mem_kb="$(awk '/^MemTotal:/ {print $2}' /proc/meminfo 2>/dev/null || echo 0)"
  sb_mb=$(( ${mem_kb:-0} / 4096 ))
  [ "$sb_mb" -le 2048 ] || sb_mb=2048
  [ "$sb_mb" -ge 128 ] || sb_mb=128
  # max_wal_size: at the ingest rates the benches and soaks push (40k+ msg/s,
  # fsync on) the 1 GB default made PostgreSQL checkpoint every ~10 s ("checkpoints
  # are occurring too frequently"), and each checkpoint restarts full-page writes
  # for every page touched next, so WAL volume fed more checkpoints. 8 GB lets
  # checkpoint_timeout (5 min) pace them, as docs/operations.md advises for production.
  # shellcheck disable=SC2086
  as_owner "$PGBIN/pg_ctl" -D "$DATA" -l "$LOG" -w -t 60 \
    -o "-p $port -c listen_addresses=127.0.0.1 -k $RUN -c max_connections=200 -c shared_buffers=${sb_mb}MB -c max_wal_size=8GB $PG_EXTRA_OPTS" \
    start >/dev/null || { tail -20 "$LOG" >&2; exit 1; }
  local url="postgres://postgres@127.0.0.1:$port/postgres"
  echo "$url" >"$RUN/url"
  echo "DATABASE_URL=$url"
}

case "${1:-}" in
  start) do_start ;;
  restart)
    url="$(cat "$RUN/url")"; port="${url##*:}"; port="${port%%/*}"
    do_start "$port" ;;
  stop) do_stop ;;
  status) if pid="$(running_pid)"; then echo "running pid=$pid url=$(cat "$RUN/url" 2>/dev/null)"; else echo stopped; exit 3; fi ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
