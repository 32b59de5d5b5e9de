#!/usr/bin/env bash
# Builds the peers of hack/peers.env into bin/ at their pinned releases,
# as their release builds do (`go build` in the module's root, with its
# own go.mod and go.sum), kept in the Go cache directory by
# hack/gobuild-cached.sh. Each binary is stamped bin/.NAME-version with
# "VERSION@COMMIT" (12 hex digits), which the benchmark prints. A peer
# that cannot be built fails here, loudly: the benchmark refuses to run
# without it.
#
# A release the module proxy refuses is built from the project's source
# repository at its tag (KUBE_VIP_GIT, METALLB_FRR_K8S_GIT: any URL or
# local clone git accepts), refused unless the tag names the commit
# peers.env pins.
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

# modcommit MODULE VERSION: the commit the module proxy says the version
# was made from.
modcommit() {
  GONOSUMDB="$1" go mod download -json "$1@$2" | sed -n 's/^[[:space:]]*"Hash": "\([0-9a-f]\{40\}\)".*/\1/p' | head -1
}

# gitsrc NAME URL TAG COMMIT: the tree of TAG from the repository at URL
# in bin/peer-src/NAME-TAG (the commit beside it, outside the tree: the
# tree is hashed), after checking that TAG is COMMIT.
gitsrc() {
  local name=$1 url=$2 tag=$3 commit=$4 dir="$bin/peer-src/$1-$3"
  if [ "$(cat "$dir.commit" 2>/dev/null)" = "$commit" ] && [ -d "$dir" ]; then
    echo "$dir"
    return
  fi
  local clone="$bin/peer-src/.clone-$name"
  rm -rf "$clone" "$dir" "$dir.tmp" "$dir.commit"
  mkdir -p "$clone" "$dir.tmp"
  git -C "$clone" init -q --bare
  git -C "$clone" fetch -q --depth 1 "$url" "refs/tags/$tag:refs/tags/$tag"
  local got
  got=$(git -C "$clone" rev-parse "refs/tags/$tag^{commit}")
  if [ "$got" != "$commit" ]; then
    echo "build-peers: $name $tag is $got in $url, peers.env pins $commit" >&2
    exit 1
  fi
  git -C "$clone" archive "$commit" | tar -x -C "$dir.tmp"
  rm -rf "$clone"
  mv "$dir.tmp" "$dir"
  echo "$commit" > "$dir.commit"
  echo "$dir"
}

# build NAME DIR KEY STAMP PACKAGE [ENV...]: PACKAGE (relative to the
# module root DIR) into bin/NAME, stamped bin/.NAME-version with STAMP,
# with the environment ENV.
build() {
  local name=$1 dir=$2 key=$3 stamp=$4 pkg=$5
  shift 5
  if [ -x "$bin/$name" ] && [ "$(cat "$bin/.$name-version" 2>/dev/null)" = "$stamp" ]; then
    return
  fi
  echo "build-peers: $name $stamp into bin/"
  # GOTOOLCHAIN=local: a module's toolchain line asks for a patch release
  # this machine's Go may not be; its go line is what it needs.
  (cd "$dir" && env GOFLAGS=-mod=readonly CGO_ENABLED=0 GOTOOLCHAIN=local "$@" \
    "$root/hack/gobuild-cached.sh" "peer-$name-$key" "$bin/$name" -trimpath "$pkg")
  echo "$stamp" > "$bin/.$name-version"
}

src=$(gitsrc kube-vip "$KUBE_VIP_GIT" "$KUBE_VIP_VERSION" "$KUBE_VIP_COMMIT")
build kube-vip "$src" "$KUBE_VIP_VERSION-$KUBE_VIP_COMMIT" "$KUBE_VIP_VERSION@${KUBE_VIP_COMMIT:0:12}" .

# MetalLB from the module proxy, its frr-k8s from a proxy directory of
# our own (hack/modproxy) put before the module proxy; GONOSUMDB only
# skips the checksum database, MetalLB's go.sum still judges the zip.
mlb=$(moddir "$METALLB_MODULE" "$METALLB_VERSION")
mlbcommit=$(modcommit "$METALLB_MODULE" "$METALLB_VERSION")
[ -n "$mlbcommit" ] || { echo "build-peers: the module proxy names no commit for $METALLB_MODULE@$METALLB_VERSION" >&2; exit 1; }
frr=$(gitsrc frr-k8s "$METALLB_FRR_K8S_GIT" "$METALLB_FRR_K8S_VERSION" "$METALLB_FRR_K8S_COMMIT")
proxy="$bin/peer-proxy"
if [ ! -f "$proxy/$METALLB_FRR_K8S_MODULE/@v/$METALLB_FRR_K8S_VERSION.zip" ]; then
  go run "$root/hack/modproxy" -dir "$frr" -module "$METALLB_FRR_K8S_MODULE" -version "$METALLB_FRR_K8S_VERSION" -o "$proxy"
fi
mlbenv=("GOPROXY=file://$proxy,$(go env GOPROXY)" "GONOSUMDB=$METALLB_MODULE,$METALLB_FRR_K8S_MODULE")
stamp="$METALLB_VERSION@${mlbcommit:0:12}"
for part in controller speaker; do
  build "metallb-$part" "$mlb" "$METALLB_VERSION-$mlbcommit" "$stamp" "./$part" "${mlbenv[@]}"
done

# MetalLB's CRDs as its release manifests install them, for the
# benchmark's apiserver: bin/metallb-crds/.
crds="$bin/metallb-crds"
if [ "$(cat "$crds/.version" 2>/dev/null)" != "$stamp" ]; then
  rm -rf "$crds.tmp" && mkdir -p "$crds.tmp"
  cp "$mlb"/config/crd/bases/*.yaml "$crds.tmp/"
  chmod u+w "$crds.tmp"/*.yaml
  echo "$stamp" > "$crds.tmp/.version"
  rm -rf "$crds" && mv "$crds.tmp" "$crds"
fi

# MetalLB's FRR mode: the reloader its speaker pods run beside FRR
# (frr-tools/reloader/frr-reloader.sh, which the release image's
# cp-reloader init container copies into the pod), unchanged:
# bin/metallb-frr/.
frrdir="$bin/metallb-frr"
if [ "$(cat "$frrdir/.version" 2>/dev/null)" != "$stamp" ]; then
  rm -rf "$frrdir.tmp" && mkdir -p "$frrdir.tmp"
  install -m 0755 "$mlb/frr-tools/reloader/frr-reloader.sh" "$frrdir.tmp/frr-reloader.sh"
  echo "$stamp" > "$frrdir.tmp/.version"
  rm -rf "$frrdir" && mv "$frrdir.tmp" "$frrdir"
fi
