#!/usr/bin/env bash
# build-previous-image.sh: the previous release's vipctl and its image, for
# the cluster lab's upgrade from it and rollback to it (TestCluster,
# docs/upgrade.md). The previous release is the newest hack/releases.txt
# records (test/previousrelease.Find); hack/build-previous.sh builds its
# vipctl from this clone's git history into bin/previous/COMMIT/, and that
# release's own `make image`, run in its worktree there, builds its image
# as it shipped it:
#   bin/previous/COMMIT/vipctl            the release's binary
#   bin/previous/COMMIT/vipctl-image.tar  its image, tagged with its version
# Cached like make image (by the release's own stamps; its Debian root
# filesystem is kept in the Go cache directory, which clones share), and
# the finished archive is kept there too: a fresh clone's bin/ is empty,
# and the release's image compressed again costs about 40 s of every CI
# run. Its key is all the archive depends on that is not in the commit:
# the Go toolchain, the machine's apt sources (the package versions) and
# the architecture.
# Prints the image's path last.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
read -r version commit < <(grep -v '^#' hack/releases.txt | grep . | tail -1)
bin=$(./hack/build-previous.sh "$version" "$commit" | tail -1)
dir=$(dirname "$bin")
image="$dir/vipctl-image.tar"
sources=/etc/apt/sources.list.d/debian.sources
[ -f "$sources" ] || sources=/etc/apt/sources.list
key=$( (echo "$version $commit amd64"; go version; cat "$sources") | sha256sum | cut -d' ' -f1)
kept="$(go env GOCACHE)/vipctl-bin/previous/$key/vipctl-image.tar"
if [ ! -s "$image" ] && [ -s "$kept" ]; then
  cp "$kept" "$image.tmp" && mv "$image.tmp" "$image"
  echo "build-previous-image: $image from the Go cache directory" >&2
fi
if [ ! -s "$image" ] || [ ! -s "$kept" ]; then
  # The release's make image builds its binary again (cached by Go) and
  # the image around it; its install-image-tools.sh installs nothing twice.
  make --no-print-directory -C "$dir/src" image VERSION="$version" VIPCTL_BIN="$bin" VIPCTL_IMAGE="$image" >&2
  mkdir -p "$(dirname "$kept")"
  cp "$image" "$kept.tmp" && mv "$kept.tmp" "$kept"
fi
echo "$image"
