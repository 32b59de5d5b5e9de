#!/usr/bin/env bash
# Builds the image of "the next version" the cluster lab's rolling upgrade
# moves to (TestCluster/RollingUpgrade): this tree's vipctl stamped
# VERSION-next, as one layer over make image's archive (BASE, default
# bin/vipctl-image.tar), named quay.io/vipctl/vipctl:VERSION-next, into OUT
# (default bin/vipctl-image-next.tar). A layer over the base rather than a
# second image from the root filesystem: the nodes' containerd shares the
# base layer, as a real upgrade whose packages did not change does, and the
# archive takes seconds instead of compressing the root filesystem again.
#
# Cached: rebuilt only when the base archive, the binary or the tag change.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/bin"
version=${1:?usage: build-next-image.sh VERSION [BASE] [OUT]}-next
base=$(realpath "${2:-$bin/vipctl-image.tar}")
out=$(realpath -m "${3:-$bin/vipctl-image-next.tar}")
tag=${version//+/-}
image="quay.io/vipctl/vipctl:$tag"
export SOURCE_DATE_EPOCH=1767225600 # as build-image.sh

binary="$bin/vipctl-next"
(cd "$root" && CGO_ENABLED=0 go build -trimpath \
  -ldflags "-s -w -X github.com/vipctl/vipctl/pkg/version.Version=$version" \
  -o "$binary.tmp" ./cmd/vipctl)
mv "$binary.tmp" "$binary"

want=$( (echo "$image"; sha256sum < "$base"; sha256sum < "$binary"; cat "$root"/hack/ociimage/*.go) | sha256sum | cut -d' ' -f1)
stamp="$out.stamp"
if [ -s "$out" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  exit 0
fi
(cd "$root" && go run ./hack/ociimage -base "$base" -add "$binary:/usr/bin/vipctl" -name "$image" -o "$out.tmp")
mv "$out.tmp" "$out"
echo "$want" > "$stamp"
echo "build-next-image: $image -> $out ($(du -h "$out" | cut -f1))"
