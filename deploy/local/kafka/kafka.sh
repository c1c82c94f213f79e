#!/usr/bin/env bash
# Local, no-Docker Apache Kafka (KRaft, one combined broker+controller) for
# tests, `make run` and benchmarks.  The broker's jars come from Maven Central
# (pom.xml beside this script) and run on the installed Java 17.
#
#   kafka.sh fetch    download the jars once into .local/kafka/libs-<version>
#   kafka.sh start    (re)start a FRESH broker (empty data) on free ports; prints
#                     KAFKA_BROKERS=127.0.0.1:<port> as the last stdout line
#   kafka.sh ensure   like start, but reuse a broker of this checkout that is
#                     already up and answering (handy for `make run` loops)
#   kafka.sh stop     SIGTERM, bounded wait, then SIGKILL; leaves no java behind
#   kafka.sh status   exit 0 and print KAFKA_BROKERS=... if up; 1 if the process
#                     runs but does not answer; 3 if not running
#   kafka.sh clean    stop, then delete .local/kafka (the Maven cache .local/m2 stays)
#   kafka.sh classpath  fetch if needed, print the jars' classpath (tests run Kafka's
#                     own Java producer and a SASL/TLS broker from the same jars)
#
# Only the KAFKA_BROKERS line goes to stdout; all progress goes to stderr, so
# callers can do:  line="$(deploy/local/kafka/kafka.sh start)"; export "$line"
# (the assignment keeps start's exit status; `eval "export $(...)"` would not).
#
# Environment (all optional):
#   QUEEN_LOCAL_DIR                 cache/run root (default <repo>/.local, git-ignored)
#   QUEEN_KAFKA_VERSION             override the kafka.version of pom.xml (experiments)
#   QUEEN_KAFKA_PORT                fixed client port (default: a free port)
#   QUEEN_KAFKA_CONTROLLER_PORT     fixed controller port (default: a free port)
#   QUEEN_KAFKA_HEAP_OPTS           default "-Xms256m -Xmx768m" (2-core/24 GiB box shared with PG+Node)
#   QUEEN_KAFKA_START_TIMEOUT       seconds to wait for readiness (default 90)
#   QUEEN_KAFKA_STOP_TIMEOUT        seconds to wait after SIGTERM before SIGKILL (default 30)
#   QUEEN_KAFKA_LOG_LEVEL           broker root log level (default INFO)
#   JAVA_HOME                       Java to use (default: `java` on PATH)
# Docs: docs/kafka.md
set -euo pipefail

SCRIPT_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)"
REPO_ROOT="$(cd -- "$SCRIPT_DIR/../../.." && pwd -P)"
LOCAL_DIR="${QUEEN_LOCAL_DIR:-$REPO_ROOT/.local}"
mkdir -p -- "$LOCAL_DIR"
LOCAL_DIR="$(cd -- "$LOCAL_DIR" && pwd -P)" # absolute: it ends up in cmdlines and props

# The version is kept in ONE place: the kafka.version property of pom.xml.
POM_VERSION="$(sed -n 's|.*<kafka.version>\([^<]*\)</kafka.version>.*|\1|p' "$SCRIPT_DIR/pom.xml" | head -n1)"
VERSION="${QUEEN_KAFKA_VERSION:-$POM_VERSION}"
[[ -n "$VERSION" ]] || { echo "kafka.sh: cannot read kafka.version from $SCRIPT_DIR/pom.xml" >&2; exit 1; }

KAFKA_DIR="$LOCAL_DIR/kafka"
M2_DIR="$LOCAL_DIR/m2"                 # private Maven repo: git-ignored, reused across runs
LIBS_DIR="$KAFKA_DIR/libs-$VERSION"
STAMP="$LIBS_DIR/.fetch-complete"      # written last: its presence means "libs complete"
RUN_DIR="$KAFKA_DIR/run"
PROPS="$RUN_DIR/server.properties"
PID_FILE="$RUN_DIR/kafka.pid"
LOG_FILE="$RUN_DIR/kafka.log"
BROKERS_FILE="$RUN_DIR/brokers"
UTIL="$SCRIPT_DIR/kafka-util.mjs"

START_TIMEOUT="${QUEEN_KAFKA_START_TIMEOUT:-90}"
STOP_TIMEOUT="${QUEEN_KAFKA_STOP_TIMEOUT:-30}"
HEAP_OPTS="${QUEEN_KAFKA_HEAP_OPTS:--Xms256m -Xmx768m}"
JAVA="${JAVA_HOME:+$JAVA_HOME/bin/}java"

log() { echo "kafka.sh: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# ---------------------------------------------------------------- fetch ----

# The stamp records what was fetched; a changed pom (e.g. another log4j
# version) therefore triggers a re-fetch, an unchanged one never touches the
# network.
stamp_content() {
  echo "kafka=$VERSION pom-sha256=$(sha256sum "$SCRIPT_DIR/pom.xml" | cut -d' ' -f1)"
}

libs_complete() {
  [[ -f "$STAMP" ]] && [[ "$(cat "$STAMP")" == "$(stamp_content)" ]]
}

fetch() {
  mkdir -p "$KAFKA_DIR"
  libs_complete && return 0 # fast path: no lock, no Maven, no network
  # flock: two concurrent fetches (e.g. parallel test runners) must not write
  # the same folder at once.  The lock fd only lives in this subshell, so it
  # is never inherited by the broker.
  (
    flock -w 900 9 || die "timed out waiting for another fetch (lock $KAFKA_DIR/.fetch.lock)"
    libs_complete && exit 0 # the other fetch finished while we waited
    command -v mvn >/dev/null || die "mvn not found on PATH (needed once to fetch Kafka jars)"
    cp "$SCRIPT_DIR/pom.xml" "$KAFKA_DIR/pom.xml"
    local tmp="$LIBS_DIR.partial"
    rm -rf "$tmp"
    log "fetching Kafka $VERSION jars from Maven Central into $LIBS_DIR (one time) ..."
    local t0=$SECONDS
    # Debian's Maven 3.8.7 prints stray ANSI reset codes even with -q -B; the
    # sed strips them (pipefail keeps Maven's exit status).
    mvn -q -B -f "$KAFKA_DIR/pom.xml" \
      -Dmaven.repo.local="$M2_DIR" -Dkafka.version="$VERSION" \
      dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$tmp" </dev/null 2>&1 |
      sed -e 's/\x1b\[[0-9;]*m//g' -e '/^[[:space:]]*$/d' >&2 ||
      die "Maven fetch failed (is Maven Central reachable? is $VERSION published?)"
    ls "$tmp"/kafka_2.13-"$VERSION".jar >/dev/null 2>&1 || die "fetch finished without kafka_2.13-$VERSION.jar"
    # Swap in atomically-enough, then write the stamp LAST: an interrupted
    # fetch leaves no stamp and is simply redone next time.
    rm -rf "$LIBS_DIR"
    mv "$tmp" "$LIBS_DIR"
    stamp_content >"$STAMP"
    local jars=("$LIBS_DIR"/*.jar)
    log "fetched ${#jars[@]} jars in $((SECONDS - t0))s"
  ) 9>"$KAFKA_DIR/.fetch.lock"
}

# ------------------------------------------------------ process helpers ----

# alive PID: running and not a zombie (a reaped-late zombie still answers kill -0).
alive() {
  local stat
  stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
  stat="${stat##*) }" # drop "pid (comm) "
  [[ "${stat%% *}" != Z ]]
}

# is_ours PID: the process is a kafka.Kafka JVM started with THIS checkout's
# server.properties.  Guards every kill, so a recycled pid from a stale pid
# file (or another checkout's broker) is never touched.
is_ours() {
  local cmdline
  cmdline="$(tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null)" || return 1
  [[ "$cmdline" == *" kafka.Kafka $PROPS "* ]]
}

# our_pids: every live broker of this checkout, from the pid file and from a
# scan (the pid file can be missing if a run was killed between launch and
# writing it, or if someone deleted .local/kafka/run by hand).
our_pids() {
  local pid seen=" "
  {
    [[ -f "$PID_FILE" ]] && cat "$PID_FILE" 2>/dev/null
    pgrep -f 'kafka\.Kafka' 2>/dev/null
  } | while read -r pid; do
    [[ "$pid" =~ ^[0-9]+$ ]] || continue
    [[ "$seen" == *" $pid "* ]] && continue
    seen+="$pid "
    if alive "$pid" && is_ours "$pid"; then echo "$pid"; fi
  done
  return 0
}

# kill_pids PID...: SIGTERM (Kafka shuts down cleanly on it), poll up to
# STOP_TIMEOUT, then SIGKILL the whole session (setsid made pid == pgid).
kill_pids() {
  (($# > 0)) || return 0
  local pid deadline=$((SECONDS + STOP_TIMEOUT)) left
  log "stopping broker pid(s) $* (SIGTERM, up to ${STOP_TIMEOUT}s)"
  kill -TERM "$@" 2>/dev/null || true
  while :; do
    left=()
    for pid in "$@"; do alive "$pid" && left+=("$pid"); done
    ((${#left[@]} == 0)) && return 0
    ((SECONDS >= deadline)) && break
    sleep 0.2
  done
  log "broker did not exit in ${STOP_TIMEOUT}s; SIGKILL ${left[*]}"
  for pid in "${left[@]}"; do kill -KILL -- "-$pid" "$pid" 2>/dev/null || true; done
  deadline=$((SECONDS + 10))
  while ((SECONDS < deadline)); do
    left=()
    for pid in "$@"; do alive "$pid" && left+=("$pid"); done
    ((${#left[@]} == 0)) && return 0
    sleep 0.1
  done
  die "could not kill broker pid(s) ${left[*]}"
}

stop_ours() {
  local pids
  pids="$(our_pids)"
  # shellcheck disable=SC2086 # word-splitting the pid list is intended
  kill_pids $pids
  rm -f "$PID_FILE" "$BROKERS_FILE"
}

probe() { node "$UTIL" probe "$1" "${2:-2000}"; }

# ---------------------------------------------------------------- start ----

write_props() { # write_props PORT CONTROLLER_PORT
  cat >"$PROPS" <<EOF
# Generated by deploy/local/kafka/kafka.sh on each start; edit the script, not this.
# Single combined KRaft node; static voter set (works for 3.9 and 4.x alike,
# no --standalone/dynamic-quorum bootstrap needed).
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$2
listeners=PLAINTEXT://127.0.0.1:$1,CONTROLLER://127.0.0.1:$2
advertised.listeners=PLAINTEXT://127.0.0.1:$1
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$RUN_DIR/data

# One node: every replicated internal topic must make do with one replica.
default.replication.factor=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
# Fewer internal partitions than the defaults (50) = a faster first
# FindCoordinator/JoinGroup on a fresh broker; plenty for tests.
offsets.topic.num.partitions=8
transaction.state.log.num.partitions=4

# Test friendliness: groups form at once, topics appear on first use.
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=true
num.partitions=8
# Data is wiped on every start, so never expire anything mid-run.
log.retention.ms=-1
log.retention.bytes=-1

# 2-core machine shared with PostgreSQL and Node: fewer threads than defaults.
num.network.threads=2
num.io.threads=4
num.recovery.threads.per.data.dir=1
EOF
}

# start_once: one attempt.  Returns 0 when ready, 10 when the broker died on
# a port race (retryable), 1 otherwise.  Written with explicit error checks
# because `set -e` is not in effect inside a function called from `if`/`||`.
start_once() {
  local port cport cluster_id pid ports deadline
  # Keep the previous broker log for post-mortems of a failed test run.
  [[ -f "$LOG_FILE" ]] && mv -f "$LOG_FILE" "$KAFKA_DIR/kafka.prev.log"
  rm -rf "$RUN_DIR" || return 1 # a fresh, empty broker on every start
  mkdir -p "$RUN_DIR/data" || return 1

  ports="$(node "$UTIL" free-ports 2)" || { log "could not pick free ports"; return 1; }
  port="${QUEEN_KAFKA_PORT:-$(sed -n 1p <<<"$ports")}"
  cport="${QUEEN_KAFKA_CONTROLLER_PORT:-$(sed -n 2p <<<"$ports")}"
  cluster_id="$(node "$UTIL" cluster-id)" || return 1
  write_props "$port" "$cport" || return 1
  cp "$SCRIPT_DIR/log4j2.properties" "$RUN_DIR/log4j2.properties" || return 1

  # Format the (empty) log dir: KRaft refuses to start without meta.properties.
  # Short-lived JVM: small heap, C1 only -> starts faster.
  if ! "$JAVA" -Xmx256m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Djava.awt.headless=true \
    -Dlog4j2.configurationFile="$RUN_DIR/log4j2.properties" -Dqueen.kafka.loglevel=WARN \
    -cp "$LIBS_DIR/*" kafka.tools.StorageTool format -t "$cluster_id" -c "$PROPS" \
    >"$RUN_DIR/format.log" 2>&1; then
    log "storage format failed:"; cat "$RUN_DIR/format.log" >&2
    return 1
  fi

  # Launch detached in its own session (setsid) so it outlives this script and
  # the caller's terminal/process group, with stdio on a log file.  The tiny
  # bash wrapper records its own pid and then exec's java, so the pid file
  # holds the JVM's pid whether or not setsid had to fork; it also closes every
  # inherited fd > 2 so the broker can never hold a caller's pipe open (e.g.
  # `out=$(kafka.sh start)` or a test runner waiting for EOF).
  # shellcheck disable=SC2016 # $1/$$ are for the inner bash
  # shellcheck disable=SC2086 # HEAP_OPTS is a list of JVM flags
  setsid bash -c '
    echo $$ >"$1"; shift
    for fd in /proc/$$/fd/*; do fd=${fd##*/}; [ "$fd" -gt 2 ] 2>/dev/null && eval "exec $fd>&-" 2>/dev/null; done
    exec "$@"' kafka-launch "$PID_FILE" \
    "$JAVA" $HEAP_OPTS -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 \
    -XX:+ExplicitGCInvokesConcurrent -Djava.awt.headless=true \
    -Dlog4j2.configurationFile="$RUN_DIR/log4j2.properties" \
    -Dqueen.kafka.loglevel="${QUEEN_KAFKA_LOG_LEVEL:-INFO}" \
    -cp "$LIBS_DIR/*" kafka.Kafka "$PROPS" \
    </dev/null >"$LOG_FILE" 2>&1 &

  # Wait for the pid file (written before exec, so almost immediately).
  deadline=$((SECONDS + 10))
  until [[ -s "$PID_FILE" ]]; do
    ((SECONDS < deadline)) || { log "broker launch produced no pid file"; return 1; }
    sleep 0.05
  done
  pid="$(cat "$PID_FILE")"
  log "broker pid $pid, client port $port, controller port $cport, log $LOG_FILE"

  # Readiness = the broker answers a Metadata request listing itself (i.e. it
  # is registered and unfenced), polled until a deadline.
  deadline=$((SECONDS + START_TIMEOUT))
  while :; do
    if ! alive "$pid"; then
      if grep -q 'Address already in use' "$LOG_FILE" 2>/dev/null; then
        log "broker could not bind its ports ($port/$cport): address already in use"
        return 10
      fi
      log "broker exited during startup; last log lines:"
      tail -n 40 "$LOG_FILE" >&2 || true
      return 1
    fi
    probe "127.0.0.1:$port" 2000 2>/dev/null && break
    if ((SECONDS >= deadline)); then
      log "broker not ready after ${START_TIMEOUT}s; last log lines:"
      tail -n 40 "$LOG_FILE" >&2 || true
      kill_pids "$pid" || true
      return 1
    fi
    sleep 0.3
  done
  echo "KAFKA_BROKERS=127.0.0.1:$port" >"$BROKERS_FILE"
  return 0
}

start() {
  local t0=$SECONDS rc=1 attempt
  command -v node >/dev/null || die "node not found on PATH"
  command -v "$JAVA" >/dev/null || die "java not found (install Java 17+ or set JAVA_HOME)"
  mkdir -p "$KAFKA_DIR"
  # Serialise start/stop of this checkout's broker.  fd 8 is closed in the
  # broker by the launch wrapper, so the lock dies with this script.
  exec 8>"$KAFKA_DIR/.run.lock"
  flock -w 180 8 || die "another kafka.sh start/stop holds $KAFKA_DIR/.run.lock"

  # Stale-state recovery: a test run killed midway may have left a broker (or
  # just its pid file) behind.  Only a JVM running kafka.Kafka with OUR
  # server.properties is ever killed.
  stop_ours
  fetch

  for attempt in 1 2 3; do
    start_once && rc=0 || rc=$?
    ((rc == 0)) && break
    stop_ours
    # Only a port race is worth retrying, and only with ports we picked.
    if ((rc != 10)) || [[ -n "${QUEEN_KAFKA_PORT:-}${QUEEN_KAFKA_CONTROLLER_PORT:-}" ]]; then break; fi
    log "retrying start (attempt $((attempt + 1)))"
  done
  ((rc == 0)) || die "Kafka $VERSION did not start (see $LOG_FILE)"
  log "Kafka $VERSION ready in $((SECONDS - t0))s"
  cat "$BROKERS_FILE" # the one stdout line: KAFKA_BROKERS=127.0.0.1:<port>
}

# ------------------------------------------------------- other commands ----

is_up() { # prints the brokers line and succeeds when our broker is up and answering
  local pids line
  pids="$(our_pids)"
  [[ -n "$pids" && -f "$BROKERS_FILE" ]] || return 3
  line="$(cat "$BROKERS_FILE")"
  probe "${line#KAFKA_BROKERS=}" 2000 2>/dev/null || return 1
  echo "$line"
}

status() {
  local pids rc=0
  pids="$(our_pids)"
  if [[ -z "$pids" ]]; then
    log "not running (version $VERSION, libs $(libs_complete && echo cached || echo 'not fetched'))"
    return 3
  fi
  log "running: pid ${pids//$'\n'/ } (version $VERSION), log $LOG_FILE"
  is_up || rc=1
  ((rc == 0)) || log "process is up but the broker does not answer (yet)"
  return "$rc"
}

ensure() {
  if is_up 2>/dev/null; then
    log "reusing the running broker"
    return 0
  fi
  start
}

stop() {
  mkdir -p "$KAFKA_DIR"
  exec 8>"$KAFKA_DIR/.run.lock"
  flock -w 180 8 || die "another kafka.sh start/stop holds $KAFKA_DIR/.run.lock"
  local pids
  pids="$(our_pids)"
  if [[ -z "$pids" ]]; then
    log "not running"
  fi
  stop_ours
  [[ -z "$pids" ]] || log "stopped"
}

clean() {
  stop
  rm -rf "$KAFKA_DIR"
  log "removed $KAFKA_DIR (Maven cache $M2_DIR kept)"
}

case "${1:-}" in
fetch) fetch ;;
start) start ;;
ensure) ensure ;;
stop) stop ;;
status) status ;;
clean) clean ;;
classpath) fetch && echo "$LIBS_DIR/*" ;;
*)
  sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0" >&2
  exit 2
  ;;
esac
