#!/usr/bin/env bash
# Kafka Connect (standalone) + Debezium's JDBC sink connector, from Maven
# Central (pom.xml beside this script), for the Connect baseline of
# `make bench` (suite kafka-dups).  No broker or database is started here: the
# benchmark runs ConnectStandalone itself, with worker and connector
# properties it writes per run.
#
#   connect.sh fetch   download once into .local/connect (idempotent; a no-op
#                      without network when the pom is unchanged); prints
#                      CONNECT_LIBS=<dir> and CONNECT_PLUGINS=<dir> on stdout
#   connect.sh paths   print the same two lines; exit 1 if not fetched yet
#   connect.sh clean   delete .local/connect (the Maven cache .local/m2 stays)
#
# Environment: QUEEN_LOCAL_DIR (default <repo>/.local, git-ignored).
set -euo pipefail

SCRIPT_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)"
REPO_ROOT="$(cd -- "$SCRIPT_DIR/../../.." && pwd -P)"
LOCAL_DIR="${QUEEN_LOCAL_DIR:-$REPO_ROOT/.local}"
mkdir -p -- "$LOCAL_DIR"
LOCAL_DIR="$(cd -- "$LOCAL_DIR" && pwd -P)"

pom_prop() { sed -n "s|.*<$1>\([^<]*\)</$1>.*|\1|p" "$SCRIPT_DIR/pom.xml" | head -n1; }
CONNECT_VERSION="$(pom_prop connect.version)"
DEBEZIUM_VERSION="$(pom_prop debezium.version)"
[[ -n "$CONNECT_VERSION" && -n "$DEBEZIUM_VERSION" ]] || { echo "connect.sh: cannot read versions from $SCRIPT_DIR/pom.xml" >&2; exit 1; }

CONNECT_DIR="$LOCAL_DIR/connect"
M2_DIR="$LOCAL_DIR/m2" # the same private Maven repo as deploy/local/kafka
HOME_DIR="$CONNECT_DIR/connect-$CONNECT_VERSION-debezium-$DEBEZIUM_VERSION"
STAMP="$HOME_DIR/.fetch-complete" # written last: its presence means "complete"

log() { echo "connect.sh: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

stamp_content() { echo "connect=$CONNECT_VERSION debezium=$DEBEZIUM_VERSION pom-sha256=$(sha256sum "$SCRIPT_DIR/pom.xml" | cut -d' ' -f1)"; }
complete() { [[ -f "$STAMP" ]] && [[ "$(cat "$STAMP")" == "$(stamp_content)" ]]; }
paths() {
  echo "CONNECT_LIBS=$HOME_DIR/libs"
  echo "CONNECT_PLUGINS=$HOME_DIR/plugins"
}

fetch() {
  mkdir -p "$CONNECT_DIR"
  if ! complete; then
    # flock: two concurrent fetches must not write the same folder.
    (
      flock -w 900 9 || die "timed out waiting for another fetch (lock $CONNECT_DIR/.fetch.lock)"
      complete && exit 0
      command -v mvn >/dev/null || die "mvn not found on PATH (needed once to fetch Kafka Connect)"
      local tmp="$HOME_DIR.partial" t0=$SECONDS
      rm -rf "$tmp"
      mkdir -p "$tmp"
      cp "$SCRIPT_DIR/pom.xml" "$tmp/pom.xml"
      log "fetching Kafka Connect $CONNECT_VERSION and Debezium JDBC sink $DEBEZIUM_VERSION from Maven Central (one time) ..."
      # Debian's Maven prints stray ANSI codes even with -q -B: stripped.
      mvn -q -B -f "$tmp/pom.xml" -Dmaven.repo.local="$M2_DIR" \
        -Dlibs.dir="$tmp/libs" -Dplugins.dir="$tmp/plugins" \
        dependency:copy-dependencies@connect-libs dependency:unpack@jdbc-plugin </dev/null 2>&1 |
        sed -e 's/\x1b\[[0-9;]*m//g' -e '/^[[:space:]]*$/d' >&2 ||
        die "Maven fetch failed (is Maven Central reachable?)"
      ls "$tmp/libs/connect-runtime-$CONNECT_VERSION.jar" >/dev/null 2>&1 || die "fetch finished without connect-runtime-$CONNECT_VERSION.jar"
      ls "$tmp/plugins/debezium-connector-jdbc/debezium-connector-jdbc-$DEBEZIUM_VERSION.jar" >/dev/null 2>&1 || die "fetch finished without the Debezium JDBC sink plugin"
      rm -rf "$HOME_DIR"
      mv "$tmp" "$HOME_DIR"
      stamp_content >"$STAMP"
      log "fetched in $((SECONDS - t0))s into $HOME_DIR"
    ) 9>"$CONNECT_DIR/.fetch.lock"
  fi
  paths
}

case "${1:-}" in
fetch) fetch ;;
paths) complete || die "not fetched (run: $0 fetch)"; paths ;;
clean) rm -rf "$CONNECT_DIR"; log "removed $CONNECT_DIR (Maven cache $M2_DIR kept)" ;;
*)
  sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0" >&2
  exit 2
  ;;
esac
