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

# moddir MODULE VERSION: the module's source from the module proxy, in
# the module cache. The proxy serves these releases, but the checksum
# database it mirrors does not list them; their go.sum pins every
# dependency.
moddir() {
  local dir
  dir=$(GONOSUMDB="$1" go mod download -json "$1@$2" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [ -d "$dir" ] || { echo "build-peers: $1@$2: no source from the module proxy" >&2; exit 1; }
  echo "$dir"
}

# build NAME MODULE VERSION PACKAGE: the module's source from the module
# proxy, then its package PACKAGE (relative to the module root) into
# bin/NAME, stamped bin/.NAME-version.
build() {
  local name=$1 module=$2 version=$3 pkg=$4
  if [ -x "$bin/$name" ] && [ "$(cat "$bin/.$name-version" 2>/dev/null)" = "$version" ]; then
    return
  fi
  echo "build-peers: $name $version ($module) into bin/"
  local dir
  dir=$(moddir "$module" "$version")
  # GOTOOLCHAIN=local: a module's toolchain line asks for a patch release
  # this machine's Go may not be; its go line is what it needs.
  (cd "$dir" && GONOSUMDB="$module" GOFLAGS=-mod=readonly CGO_ENABLED=0 GOTOOLCHAIN=local \
    "$root/hack/gobuild-cached.sh" "peer-$name-$version" "$bin/$name" -trimpath "$pkg")
  echo "$version" > "$bin/.$name-version"
}

build kube-vip "$KUBE_VIP_MODULE" "$KUBE_VIP_VERSION" .
build metallb-controller "$METALLB_MODULE" "$METALLB_VERSION" ./controller
build metallb-speaker "$METALLB_MODULE" "$METALLB_VERSION" ./speaker

# MetalLB's CRDs as its release manifests install them, for the
# benchmark's apiserver: bin/metallb-crds/.
crds="$bin/metallb-crds"
if [ "$(cat "$crds/.version" 2>/dev/null)" != "$METALLB_VERSION+asn64" ]; then
  src=$(moddir "$METALLB_MODULE" "$METALLB_VERSION")
  rm -rf "$crds.tmp" && mkdir -p "$crds.tmp"
  cp "$src"/config/crd/bases/*.yaml "$crds.tmp/"
  chmod u+w "$crds.tmp"/*.yaml
  # v0.15.3's BGPPeer declares its ASNs int32 with a maximum of 2^32-1,
  # which kube-apiserver 1.36 refuses on every BGPPeer ("Maximum boundary
  # value must be of type integer with format int32"); v0.16 declares
  # them int64. The same fix here, nothing else changed.
  perl -0pi -e 's/format: int32(\n\s+maximum: 4294967295)/format: int64$1/g' "$crds.tmp/metallb.io_bgppeers.yaml"
  echo "$METALLB_VERSION+asn64" > "$crds.tmp/.version"
  rm -rf "$crds" && mv "$crds.tmp" "$crds"
fi

# MetalLB's FRR mode: the reloader its speaker pods run beside FRR
# (frr-tools/reloader/frr-reloader.sh, which the release image's
# cp-reloader init container copies into the pod), unchanged:
# bin/metallb-frr/.
frrdir="$bin/metallb-frr"
if [ "$(cat "$frrdir/.version" 2>/dev/null)" != "$METALLB_VERSION" ]; then
  src=$(moddir "$METALLB_MODULE" "$METALLB_VERSION")
  rm -rf "$frrdir.tmp" && mkdir -p "$frrdir.tmp"
  install -m 0755 "$src/frr-tools/reloader/frr-reloader.sh" "$frrdir.tmp/frr-reloader.sh"
  echo "$METALLB_VERSION" > "$frrdir.tmp/.version"
  rm -rf "$frrdir" && mv "$frrdir.tmp" "$frrdir"
fi
