#!/usr/bin/env bash
# make release: one directory with everything a user needs, so nobody has to
# build the image (which takes Debian's apt and root) to install vipctl:
#
#   RELEASE_DIR (default bin/release/VERSION/)
#     vipctl-linux-ARCH               the static binary for each of ARCHES
#                                     (amd64 arm64), stamped VERSION
#     vipctl-image-linux-ARCH.tar     that architecture's image as an OCI
#                                     archive, quay.io/vipctl/vipctl:VERSION
#     vipctl-image.tar                all of them under one OCI image index:
#                                     the tag a registry serves every node
#     vipctl.spdx.json                the SBOM (SPDX 2.3): each binary's Go
#                                     modules, each image's Debian packages
#     SHA256SUMS                      of them all: sha256sum -c SHA256SUMS
#
# The version is the tree's own (hack/releaseversion: the file VERSION at
# the commit that set it; git tags are not needed, but when present they
# must agree with VERSION and hack/releases.txt). A release is refused when
# the tree has changes git has not committed, when HEAD is not a release
# commit (its version is v0.1.0-N-gHASH, a commit after the release), when
# the tags disagree, and when a VERSION given (make release VERSION=...)
# is not the tree's. DEV=1 builds a development release of whatever is
# checked out, named DEV_VERSION (the Makefile's VERSION, v0.1.0-N-gHASH
# or -dirty).
#
# The binaries and images are built by make build and make image, so they
# are what the tests ran and as reproducible as those: the same commit, Go
# and apt snapshot give the same SHA256SUMS, and a release of the commit
# make image last built is a copy of its archive (hack/build-image.sh).
# ARCHES narrows the architectures (make release DEV=1 ARCHES=amd64).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
dev=${DEV:-}
version=${GIVEN_VERSION:-}
make=${MAKE:-make}

tools=$(mktemp -d)
trap 'rm -rf "$tools"' EXIT
go build -o "$tools/releaseversion" ./hack/releaseversion

problems=()
if [ -z "$dev" ] && ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  # A source archive: nothing to check the version against.
  [ -n "$version" ] || problems+=("not a git checkout: name the version (make release VERSION=v1.2.3)")
elif [ -z "$dev" ]; then
  if [ -n "$(git status --porcelain)" ]; then
    problems+=("the tree has changes git has not committed (git status): a release is built from a commit")
  fi
  if ! check=$("$tools/releaseversion" -check 2>&1); then
    problems+=("$check")
  fi
  # The tree's own, also when make's VERSION is the one given.
  own=$("$tools/releaseversion") || own=unknown
  if [ -n "$version" ] && [ "$version" != "$own" ]; then
    problems+=("VERSION=$version, but this commit is $own (the file VERSION and hack/releases.txt)")
  fi
  version=${version:-$own}
else
  version=${version:-${DEV_VERSION:?set by make release}}
fi
# The rule render's image warning and vipctl version follow
# (pkg/version.IsRelease).
if [ -z "$dev" ] && ! judged=$("$tools/releaseversion" -judge "$version" 2>&1); then
  problems+=("$judged")
fi
dir=${RELEASE_DIR:-bin/release/$version}
# The directory is replaced as a whole, so only one that a release wrote
# (every file named in its SHA256SUMS) or an empty one, never the current
# directory (the repository) or one that holds it, nor /. A symbolic link
# is followed: the directory it names is replaced, the link stays.
is_release() {
  local f names
  [ -n "$(ls -A "$1")" ] || return 0
  [ -f "$1/SHA256SUMS" ] || return 1
  names=$(sed -n 's/^[0-9a-f]\{64\}  //p' "$1/SHA256SUMS")
  for f in "$1"/* "$1"/.[!.]* "$1"/..?*; do
    [ -e "$f" ] || [ -L "$f" ] || continue
    f=$(basename "$f")
    [ "$f" = SHA256SUMS ] || grep -qxF -- "$f" <<<"$names" || return 1
  done
}
if [ -e "$dir" ] || [ -L "$dir" ]; then
  if ! real=$(cd "$dir" 2>/dev/null && pwd -P); then
    problems+=("RELEASE_DIR $dir: exists and is not a directory (or names nothing)")
  elif [ "$real" = / ]; then
    problems+=("RELEASE_DIR $dir: the root directory; name a directory of the release's own")
  elif here=$(pwd -P) && { [ "$here" = "$real" ] || [ "${here#"$real"/}" != "$here" ]; }; then
    problems+=("RELEASE_DIR $dir: is or holds the repository ($here), which the release would replace as a whole; name a directory of its own")
  elif ! is_release "$real"; then
    problems+=("RELEASE_DIR $dir: not empty and not a release (a file SHA256SUMS does not name); refusing to replace it")
  else
    dir=$real
  fi
fi
stage="$(dirname "$dir")/.$(basename "$dir").tmp"
# Refused before anything is staged: nothing to remove (with RELEASE_DIR=/
# the stage's name would be /.tmp).
refuse() {
  echo "release: refused:" >&2
  printf '  %s\n' "${problems[@]}" >&2
  echo "(make release DEV=1 makes a development build of any tree)" >&2
  exit 1
}
# Refused before anything is built.
[ ${#problems[@]} -eq 0 ] || refuse

rm -rf "$stage"
mkdir -p "$stage"
archives=()
sbom_args=()
for arch in ${ARCHES:-amd64 arm64}; do
  bin="$stage/vipctl-linux-$arch"
  image="$stage/vipctl-image-linux-$arch.tar"
  "$make" --no-print-directory build ARCH="$arch" VERSION="$version" VIPCTL_BIN="$bin"
  # -o build: the binary is built already; make image would link it again.
  # Its every ELF file is checked to be this architecture's.
  "$make" --no-print-directory -o build image ARCH="$arch" VERSION="$version" VIPCTL_BIN="$bin" VIPCTL_IMAGE="$image"
  archives+=(-index "$image")
  sbom_args+=(-binary "$bin" -image "$image")
done
# The image index's blobs are the per-architecture images', as they are:
# each image has the same digest in its archive and under the index.
go run ./hack/ociimage "${archives[@]}" -name "quay.io/vipctl/vipctl:${version//+/-}" -o "$stage/vipctl-image.tar"
# Dated by the release's commit, so the same commit gives the same file.
SOURCE_DATE_EPOCH=$(git log -1 --format=%ct 2>/dev/null || echo 0) \
  go run ./hack/sbom -version "$version" "${sbom_args[@]}" -o "$stage/vipctl.spdx.json"
(cd "$stage" && sha256sum -- * > SHA256SUMS)

# The directory appears whole or not at all; a second release of the same
# version replaces the first.
rm -rf "$dir.old"
if [ -e "$dir" ]; then
  chmod --reference="$dir" "$stage" # a private (0700) directory stays so
  mv "$dir" "$dir.old"
fi
mv "$stage" "$dir"
rm -rf "$dir.old"
kind="release"
[ -z "$dev" ] || kind="development build"
echo "release: $kind $version in $dir:"
sed 's/^/  /' "$dir/SHA256SUMS"
