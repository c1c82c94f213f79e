#!/usr/bin/env bash
# Runs a command with PostgreSQL (and optionally Kafka) available, starting
# private local instances for whatever the environment does not already name,
# and stopping exactly what it started when the command ends (also on Ctrl-C
# or kill). Used by `make test`, `make run` and `make bench`.
#
#   scripts/with-deps.sh [--kafka] [--profile test|run] -- command args...
#
# DATABASE_URL set  -> that server is used, nothing is started.
# KAFKA_BROKERS set -> that cluster is used, nothing is started.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
want_kafka=0
profile=run
while [ $# -gt 0 ]; do
  case "$1" in
    --kafka) want_kafka=1; shift ;;
    --profile) profile="$2"; shift 2 ;;
    --) shift; break ;;
    *) echo "with-deps: unknown option $1" >&2; exit 2 ;;
  esac
done
[ $# -gt 0 ] || { echo "with-deps: no command given" >&2; exit 2; }

# make test only: where a Docker engine answers, PostgreSQL and Kafka may come
# from testcontainers instead (test/helpers/testDeps.ts decides and logs why;
# QUEEN_TEST_DEPS=local|docker forces it). Without an engine (CI) nothing changes.
switch="$repo/dist/test/helpers/testDeps.js"
if [ "$profile" = test ] && [ -z "${DATABASE_URL:-}" ] && [ -z "${KAFKA_BROKERS:-}" ] && [ -f "$switch" ]; then
  if [ "$(node "$switch" choose)" = docker ]; then
    exec node "$switch" containers $([ "$want_kafka" = 1 ] && echo --kafka) -- "$@"
  fi
  export QUEEN_TEST_DEPS_MODE=local
elif [ "$profile" = test ]; then
  export QUEEN_TEST_DEPS_MODE=external
fi

started_pg=0
started_kafka=0
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [ "$started_kafka" = 1 ]; then bash "$repo/deploy/local/kafka/kafka.sh" stop >&2 || true; fi
  if [ "$started_pg" = 1 ]; then bash "$repo/deploy/local/postgres.sh" stop >&2 || true; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ -z "${DATABASE_URL:-}" ]; then
  if [ "$profile" = test ]; then
    # Throw-away cluster: durability settings off for speed (tests never rely on them;
    # crash tests kill our processes, not the database host).
    export QUEEN_PG_OPTS="${QUEEN_PG_OPTS:--c fsync=off -c synchronous_commit=off -c full_page_writes=off}"
  fi
  echo "with-deps: starting local PostgreSQL 15" >&2
  started_pg=1
  line="$(bash "$repo/deploy/local/postgres.sh" start | tail -1)"
  export DATABASE_URL="${line#DATABASE_URL=}"
fi

if [ "$want_kafka" = 1 ] && [ -z "${KAFKA_BROKERS:-}" ]; then
  echo "with-deps: starting local Apache Kafka (KRaft)" >&2
  started_kafka=1
  line="$(bash "$repo/deploy/local/kafka/kafka.sh" start | tail -1)"
  export KAFKA_BROKERS="${line#KAFKA_BROKERS=}"
fi

# Not exec: the trap must run after the command to stop what was started.
# The command runs in the background so a signal to this script is handled
# at once, and is forwarded to the command, which then shuts down cleanly.
"$@" &
child=$!
forward() { kill -s "$1" "$child" 2>/dev/null || true; wait "$child" 2>/dev/null; exit "$2"; }
trap 'forward INT 130' INT
trap 'forward TERM 143' TERM
set +e
wait "$child"
rc=$?
set -e
exit "$rc"
