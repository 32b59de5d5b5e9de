#!/usr/bin/env bash
# Builds the kubelet of the kubelet lab from k8s.io/kubernetes at the release
# pinned in hack/apiserver/go.mod, the same one the test apiserver is built
# from, into bin/, and the lab's pause image. Nothing prebuilt is
# downloaded. About five minutes on two
# cores the first time (the apiserver build warms most of the cache);
# afterwards an up-to-date bin/kubelet is skipped entirely.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mod="$root/hack/apiserver"
bin="$root/bin"
mkdir -p "$bin"

stamp="$bin/.kubelet-stamp"
want=$(cat "$mod/go.mod" "$mod/go.sum" | sha256sum | cut -d' ' -f1)
if [ ! -x "$bin/kubelet" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "build-kubelet: kubelet into bin/ (from the Go cache directory when built before; a first build takes several minutes)"
  (cd "$mod" && "$root/hack/gobuild-cached.sh" "$want" "$bin/kubelet" -trimpath k8s.io/kubernetes/cmd/kubelet)
  echo "$want" > "$stamp"
  "$bin/kubelet" --version
fi

# The pod sandbox image of the kubelet lab (containerd's sandbox_image): a
# static Go program, since registry.k8s.io is out of reach.
pause_want=$(cat "$root"/hack/pause/*.go "$root"/hack/ociimage/*.go | sha256sum | cut -d' ' -f1)
if [ ! -s "$bin/pause-image.tar" ] || [ "$(cat "$bin/.pause-stamp" 2>/dev/null)" != "$pause_want" ]; then
  cd "$root"
  CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$bin/pause" ./hack/pause
  go run ./hack/ociimage -add "$bin/pause:/pause" -entrypoint /pause -name localhost/vipctl-lab/pause:1 -o "$bin/pause-image.tar"
  echo "$pause_want" > "$bin/.pause-stamp"
fi
