#!/usr/bin/env bash
# Builds the rest of the cluster lab's control plane (test/clusterlab) from
# k8s.io/kubernetes at the release pinned in hack/apiserver/go.mod, the
# same one the apiserver and the kubelet are built from: kube-controller-
# manager, kube-scheduler and kube-proxy, into bin/; and the lab's workload
# image (labprobe, test/lab/probe: the echo Deployment's and the router
# stand-in's server). Nothing prebuilt is downloaded. Several minutes on two
# cores the first time (the apiserver and kubelet builds warm most of the
# cache); afterwards an up-to-date bin/ is skipped entirely.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mod="$root/hack/apiserver"
bin="$root/bin"
mkdir -p "$bin"

stamp="$bin/.cluster-stamp"
want=$(cat "$mod/go.mod" "$mod/go.sum" | sha256sum | cut -d' ' -f1)
components=(kube-controller-manager kube-scheduler kube-proxy)
built=1
for c in "${components[@]}"; do [ -x "$bin/$c" ] || built=0; done
if [ "$built" = 0 ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "build-cluster: ${components[*]} into bin/ (from the Go cache directory when built before; a first build takes several minutes)"
  for c in "${components[@]}"; do
    (cd "$mod" && "$root/hack/gobuild-cached.sh" "$want" "$bin/$c" -trimpath "k8s.io/kubernetes/cmd/$c")
  done
  echo "$want" > "$stamp"
  "$bin/kube-proxy" --version
fi

# The workload image: labprobe, static, on its own (pods reach nothing
# but their port). Tagged with its inputs' hash, so a changed labprobe is a
# new image and never a stale one a node already holds.
probe_want=$(cat "$root"/test/lab/probe/*.go "$root"/test/lab/probe/labprobe/*.go "$root"/hack/ociimage/*.go | sha256sum | cut -d' ' -f1)
if [ ! -s "$bin/labprobe-image.tar" ] || [ "$(cat "$bin/.labprobe-stamp" 2>/dev/null)" != "$probe_want" ]; then
  cd "$root"
  CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$bin/labprobe" ./test/lab/probe/labprobe
  go run ./hack/ociimage -add "$bin/labprobe:/labprobe" -entrypoint /labprobe -name "localhost/vipctl-lab/labprobe:${probe_want:0:12}" -o "$bin/labprobe-image.tar"
  echo "$probe_want" > "$bin/.labprobe-stamp"
fi
