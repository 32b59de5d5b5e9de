#!/usr/bin/env bash
# Builds the peers of hack/peers.env into bin/ from their own Go modules at
# the pinned release, as their release builds do (`go build` in the
# module's root, with its own go.mod and go.sum), kept in the Go cache
# directory by hack/gobuild-cached.sh. A peer that cannot be built fails
# here, loudly: the benchmark refuses to run without it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/bin"
mkdir -p "$bin"
# shellcheck source=peers.env
. "$root/hack/peers.env"

# build NAME MODULE VERSION PACKAGE: the module's source from the module
# proxy, then its package PACKAGE (relative to the module root) into
# bin/NAME, stamped bin/.NAME-version.
build() {
  local name=$1 module=$2 version=$3 pkg=$4
  if [ -x "$bin/$name" ] && [ "$(cat "$bin/.$name-version" 2>/dev/null)" = "$version" ]; then
    return
  fi
  echo "build-peers: $name $version ($module) into bin/"
  # The proxy serves these releases, but the checksum database it
  # mirrors does not list them; their go.sum pins every dependency.
  local dir
  dir=$(GONOSUMDB="$module" go mod download -json "$module@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [ -d "$dir" ] || { echo "build-peers: $module@$version: no source from the module proxy" >&2; exit 1; }
  (cd "$dir" && GONOSUMDB="$module" GOFLAGS=-mod=readonly CGO_ENABLED=0 \
    "$root/hack/gobuild-cached.sh" "peer-$name-$version" "$bin/$name" -trimpath "$pkg")
  echo "$version" > "$bin/.$name-version"
}

build kube-vip "$KUBE_VIP_MODULE" "$KUBE_VIP_VERSION" .
