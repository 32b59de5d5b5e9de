#!/usr/bin/env bash
# make release: one directory with everything a user needs, so nobody has to
# build the image (which takes Debian's apt and root) to install vipctl:
#
#   RELEASE_DIR (default bin/release/VERSION/)
#     vipctl            the static binary (linux/amd64), stamped VERSION
#     vipctl-image.tar  the image as an OCI archive, quay.io/vipctl/vipctl:VERSION
#     SHA256SUMS        of both: sha256sum -c SHA256SUMS
#
# VERSION is GIVEN_VERSION (make release VERSION=...) or else the tag at HEAD
# (git describe --tags --exact-match). A release is refused when the tree has
# changes git has not committed, when HEAD has no tag and no version is
# given, when the given version is not HEAD's tag, and when the version is
# not a release's (vipctl version says so: pkg/version.IsRelease). DEV=1
# builds a development release of whatever is checked out, named DEV_VERSION
# (the Makefile's VERSION, git describe --tags --always --dirty).
#
# Both files are built by make build and make image, so they are what the
# tests ran and as reproducible as those: the same commit, Go and apt
# snapshot give the same SHA256SUMS, and a release of the commit make image
# last built is a copy of its archive (hack/build-image.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
dev=${DEV:-}
version=${GIVEN_VERSION:-}
make=${MAKE:-make}

problems=()
if [ -z "$dev" ] && ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  # A source archive: nothing to check the version against.
  [ -n "$version" ] || problems+=("not a git checkout: name the version (make release VERSION=v1.2.3)")
elif [ -z "$dev" ]; then
  if [ -n "$(git status --porcelain)" ]; then
    problems+=("the tree has changes git has not committed (git status): a release is built from a commit")
  fi
  tags=$(git tag --points-at HEAD)
  if [ -z "$version" ]; then
    version=$(git describe --tags --exact-match 2>/dev/null || true)
    [ -n "$version" ] || problems+=("HEAD has no tag: tag the commit to release (git tag -a v1.2.3)")
  elif [ -n "$tags" ] && ! grep -qxF -- "$version" <<<"$tags"; then
    problems+=("VERSION=$version, but HEAD is tagged ${tags//$'\n'/ }")
  fi
else
  version=${version:-${DEV_VERSION:?set by make release}}
fi

dir=${RELEASE_DIR:-bin/release/$version}
stage="$(dirname "$dir")/.$(basename "$dir").tmp"
refuse() {
  rm -rf "$stage"
  echo "release: refused:" >&2
  printf '  %s\n' "${problems[@]}" >&2
  echo "(make release DEV=1 makes a development build of any tree)" >&2
  exit 1
}
# Refused before anything is built; the version's own shape is judged by
# the binary, below.
[ ${#problems[@]} -eq 0 ] || refuse

rm -rf "$stage"
mkdir -p "$stage"
"$make" --no-print-directory build VERSION="$version" VIPCTL_BIN="$stage/vipctl"
# The binary judges its own version: the one definition of a release's is
# the one that decides whether render warns about the image.
if [ -z "$dev" ] && ! "$stage/vipctl" version -o yaml | grep -qx 'release: true'; then
  problems+=("$version is not a release version: v1.2.3, or v1.2.3-rc.1 (also -alpha.N, -beta.N) for a candidate")
fi
[ ${#problems[@]} -eq 0 ] || refuse
# -o build: the binary is built already; make image would link it again.
"$make" --no-print-directory -o build image VERSION="$version" VIPCTL_BIN="$stage/vipctl" VIPCTL_IMAGE="$stage/vipctl-image.tar"
(cd "$stage" && sha256sum vipctl vipctl-image.tar > SHA256SUMS)

# The directory appears whole or not at all; a second release of the same
# version replaces the first.
rm -rf "$dir.old"
if [ -e "$dir" ]; then mv "$dir" "$dir.old"; fi
mv "$stage" "$dir"
rm -rf "$dir.old"
kind="release"
[ -z "$dev" ] || kind="development build"
echo "release: $kind $version in $dir:"
sed 's/^/  /' "$dir/SHA256SUMS"
