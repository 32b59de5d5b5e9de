#!/usr/bin/env bash
# make release-verify: checks a release directory (make release's) as a
# user or the release workflow receives it, before anything is published:
# every file its SHA256SUMS names matches and no file is left out; every
# ELF file of every image, in each architecture's archive and under the
# image index, is its image's architecture's. Prints each archive's digest
# (index.json's one entry): vipctl-image.tar's is the image index the
# release workflow pushes and signs.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=$(realpath "${1:?usage: release-verify.sh DIR}")
cd "$dir"
sha256sum --quiet --strict -c SHA256SUMS
listed=$(cut -d' ' -f3- SHA256SUMS | sed 's/^\*//' | sort)
present=$(find . -maxdepth 1 -type f ! -name SHA256SUMS -printf '%f\n' | sort)
if [ "$listed" != "$present" ]; then
  echo "release-verify: $dir holds files SHA256SUMS does not name, or lacks some it names:" >&2
  diff <(echo "$listed") <(echo "$present") >&2 || true
  exit 1
fi
cd "$root"
go run ./hack/imagecheck "$dir"/vipctl-image*.tar
