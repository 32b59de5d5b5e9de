#!/usr/bin/env bash
# build-previous.sh VERSION [COMMIT]: the vipctl binary of an earlier
# release, built from this clone's git history, for the version-skew tests
# (test/e2e TestSkew*) and the cluster lab's upgrade from the previous
# release. COMMIT defaults to the one hack/releases.txt records for VERSION
# (hack/releaseversion -commit); test/previousrelease names the previous
# release of this tree and calls this script.
#
# The release's source is a git worktree of COMMIT (detached) at
#   bin/previous/COMMIT/src
# and its binary is
#   bin/previous/COMMIT/vipctl
# printed as the last line of output. A worktree rather than an archive:
# the release's own scripts may ask git about their tree (a directory
# under bin/ would otherwise be read as this tree). The source directory is
# kept for whatever else the release is to build (its image, from its own
# hack/): run that release's make targets in it.
#
# Built by the release's own Makefile (`make build`), so with the LDFLAGS
# that release shipped with (-s -w, its version stamped into
# pkg/version.Version) and CGO_ENABLED=0, VERSION given on make's command
# line: the release's tree may predate the file VERSION, and a worktree
# has no tags. Cached by commit: nothing is built when the binary exists
# (the worktree is made again if it was removed).
# Nothing is fetched beyond the Go module proxy (the release's go.sum).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
version=${1:?usage: build-previous.sh VERSION [COMMIT]}
commit=${2:-}
if [ -z "$commit" ]; then
  commit=$(cd "$root" && go run ./hack/releaseversion -commit "$version")
fi
if ! [[ $commit =~ ^[0-9a-f]{40}$ ]]; then
  echo "build-previous: $version: commit $commit is not a full commit hash (40 hex digits)" >&2
  exit 1
fi
if ! git -C "$root" cat-file -e "$commit^{commit}" 2>/dev/null; then
  echo "build-previous: $version: commit $commit is not in this clone (a shallow clone? git fetch --unshallow)" >&2
  exit 1
fi

dir="$root/bin/previous/$commit"
src="$dir/src"
out="$dir/vipctl"
mkdir -p "$dir"
# A worktree left by an earlier or interrupted run is reused when it is at
# COMMIT. Otherwise it is made again; --force takes the path over when git
# still has it registered but its directory was removed (rm -rf bin/). Only
# this path: other worktrees of the clone are none of this script's.
if [ "$(git -C "$src" rev-parse HEAD 2>/dev/null)" != "$commit" ] ||
  [ "$(git -C "$src" rev-parse --show-toplevel 2>/dev/null)" != "$src" ]; then
  rm -rf "$src"
  git -C "$root" worktree add --quiet --force --detach "$src" "$commit"
fi

if [ -x "$out" ] && [ "$(cat "$out.version" 2>/dev/null)" = "$version" ]; then
  echo "$out"
  exit 0
fi

rm -f "$out.tmp"
make --no-print-directory -C "$src" build VERSION="$version" VIPCTL_BIN="$out.tmp" >&2
mv "$out.tmp" "$out"
echo "$version" > "$out.version"
echo "$out"
