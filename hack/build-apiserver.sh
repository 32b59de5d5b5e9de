#!/usr/bin/env bash
# Builds the tests' control plane from Go modules: kube-apiserver from
# k8s.io/kubernetes and etcd from go.etcd.io/etcd/server/v3, at the versions
# pinned in hack/apiserver/go.mod, into bin/. Nothing prebuilt is downloaded.
# The first build takes several minutes on two cores; afterwards the Go build
# cache makes it seconds, and an up-to-date bin/ is skipped entirely.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mod="$root/hack/apiserver"
bin="$root/bin"
mkdir -p "$bin"

stamp="$bin/.apiserver-stamp"
want=$(cat "$mod/go.mod" "$mod/go.sum" "$mod/etcd/main.go" | sha256sum | cut -d' ' -f1)
if [ -x "$bin/kube-apiserver" ] && [ -x "$bin/etcd" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  exit 0
fi
cd "$mod"
echo "build-apiserver: kube-apiserver and etcd into bin/ (from the Go cache directory when built before; a first build takes several minutes)"
"$root/hack/gobuild-cached.sh" "$want" "$bin/kube-apiserver" -trimpath k8s.io/kubernetes/cmd/kube-apiserver
"$root/hack/gobuild-cached.sh" "$want" "$bin/etcd" -trimpath ./etcd
echo "$want" > "$stamp"
"$bin/kube-apiserver" --version
