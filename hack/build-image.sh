#!/usr/bin/env bash
# Builds vipctl's one container image (keepalived, haproxy, FRR and the sidecar)
# for ARCH (default amd64; arm64) as an OCI archive: OUT (default
# bin/vipctl-image.tar, bin/vipctl-image-arm64.tar for arm64), named
# quay.io/vipctl/vipctl:VERSION.
#
#   build-image.sh VERSION [BINARY] [OUT] [ARCH]
#
#   1. the root filesystem from Debian bookworm's packages of ARCH
#      (mmdebstrap, essential variant plus the daemons), through the
#      machine's configured apt sources; no base image is pulled from any
#      registry. For another architecture than the machine's, the packages'
#      maintainer scripts run under qemu-user-static
#      (hack/install-image-tools.sh ARCH registers it);
#   2. the release-built static BINARY (default bin/vipctl, make build with
#      GOARCH=ARCH) at /usr/bin/vipctl;
#   3. hack/ociimage writes the OCI layout (one layer) into a tar;
#   4. hack/imagecheck fails the build if one ELF file in it is not ARCH's.
#
# Cached: the root filesystem is rebuilt only when its package list, ARCH
# or this script change, the archive only when the rootfs, the binary or
# the tag change. SOURCE_DATE_EPOCH pins every timestamp, so equal inputs
# give an equal archive; an OUT elsewhere (make release) whose inputs equal
# those of bin/vipctl-image.tar (bin/vipctl-image-ARCH.tar) is a copy of
# it, not compressed again.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/bin"
version=${1:?usage: build-image.sh VERSION [BINARY] [OUT] [ARCH]}
arch=${4:-amd64}
# amd64's files keep the names they had before there was a second
# architecture; the labs read them.
suffix=""
[ "$arch" = amd64 ] || suffix="-$arch"
binary=$(realpath "${2:-$bin/vipctl$suffix}")
out=$(realpath -m "${3:-$bin/vipctl-image$suffix.tar}")
# A tag may not hold '+' (Go's +dirty, +incompatible): the same mapping as
# version.ImageTag.
tag=${version//+/-}
image="quay.io/vipctl/vipctl:$tag"
mkdir -p "$bin"

# Packages the containers run: keepalived and haproxy; FRR for bgp pools
# (zebra, bfdd, bgpd and vtysh; frr-pythontools is frr-reload.py, which
# applies a new frr.conf without resetting sessions); nftables and
# iproute2 for looking at a node by hand (vipctl speaks netlink itself).
packages=keepalived,haproxy,frr,frr-pythontools,nftables,iproute2
# Pinned so the same script gives the same files; the mirror snapshot date
# in the machine's sources decides the package versions.
export SOURCE_DATE_EPOCH=1767225600 # 2026-01-01T00:00:00Z
sources=/etc/apt/sources.list.d/debian.sources
[ -f "$sources" ] || sources=/etc/apt/sources.list

rootfs="$bin/image-rootfs$suffix.tar"
rootfs_stamp="$bin/.image-rootfs$suffix-stamp"
rootfs_want=$( (cat "$0"; cat "$sources"; echo "$arch") | sha256sum | cut -d' ' -f1)
# A fresh clone's bin/ is empty: the root filesystem built for the same
# inputs is kept in the Go cache directory too, which clones share.
rootfs_kept="$(go env GOCACHE)/vipctl-bin/$rootfs_want/image-rootfs.tar"
if { [ ! -s "$rootfs" ] || [ "$(cat "$rootfs_stamp" 2>/dev/null)" != "$rootfs_want" ]; } && [ -s "$rootfs_kept" ]; then
  cp "$rootfs_kept" "$rootfs.tmp" && mv "$rootfs.tmp" "$rootfs"
  echo "$rootfs_want" > "$rootfs_stamp"
fi
if [ ! -s "$rootfs" ] || [ "$(cat "$rootfs_stamp" 2>/dev/null)" != "$rootfs_want" ]; then
  echo "build-image: root filesystem from Debian's $arch packages ($packages)"
  # The output's name must end in .tar: mmdebstrap picks the format from it.
  # path-exclude: no docs, man pages, locales or info in the image (the
  # copyright files stay, they are the licences). keepalived_script runs
  # the check scripts (enable_script_security, script_user in
  # keepalived.conf); the essential variant has no useradd, so the entries
  # are written directly.
  mmdebstrap --quiet --variant=essential --arch="$arch" --include="$packages" \
    --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --customize-hook='echo "keepalived_script:x:999:999:keepalived check scripts:/nonexistent:/usr/sbin/nologin" >> "$1/etc/passwd"' \
    --customize-hook='echo "keepalived_script:x:999:" >> "$1/etc/group"' \
    --customize-hook='sed -i -e "s/^frrvty:\(.*\):\([^:]*\)\$/frrvty:\1:\2,root/" -e "s/^frrvty:\(.*\):,root\$/frrvty:\1:root/" "$1/etc/group"' \
    --customize-hook='grep -q "^frrvty:.*[:,]root\$" "$1/etc/group"' \
    --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/* "$1"/var/log/*' \
    --customize-hook='chroot "$1" dpkg-query -W -f "\${Package} \${Version}\n" keepalived haproxy frr frr-pythontools nftables iproute2 > "$1/etc/vipctl-image-packages"' \
    bookworm "$bin/image-rootfs$suffix.tmp.tar" "$sources"
  mv "$bin/image-rootfs$suffix.tmp.tar" "$rootfs"
  echo "$rootfs_want" > "$rootfs_stamp"
  mkdir -p "$(dirname "$rootfs_kept")"
  cp "$rootfs" "$rootfs_kept.tmp" && mv "$rootfs_kept.tmp" "$rootfs_kept"
fi

# The cache is bin/vipctl-image.tar (make image's; bin/vipctl-image-ARCH.tar)
# and its stamp, the hash of every input.
cached="$bin/vipctl-image$suffix.tar"
stamp="$bin/.image$suffix-stamp"
want=$( (echo "$image"; echo "$rootfs_want"; sha256sum < "$binary"; cat "$root"/hack/ociimage/*.go) | sha256sum | cut -d' ' -f1)
if [ -s "$cached" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  if [ "$out" != "$cached" ]; then
    cp "$cached" "$out.tmp"
    mv "$out.tmp" "$out"
    echo "build-image: $image -> $out (same inputs as $cached)"
  fi
  exit 0
fi
# The image's user is nobody: the allocator Deployment asks for
# runAsNonRoot, which a kubelet refuses for an image that would run as root
# unless the platform picks a UID (OpenShift's restricted SCC does, plain
# Kubernetes does not: the cluster lab found it). The static pods run as
# root by their own securityContext.
(cd "$root" && go run ./hack/ociimage -arch "$arch" -rootfs "$rootfs" -add "$binary:/usr/bin/vipctl" -user 65534:65534 -name "$image" -o "$out.tmp")
# Every ELF file of the image is ARCH's: a foreign root filesystem or a
# vipctl of another GOARCH fails here, before the archive is kept.
if ! (cd "$root" && go run ./hack/imagecheck -arch "$arch" "$out.tmp"); then
  rm -f "$out.tmp"
  exit 1
fi
mv "$out.tmp" "$out"
if [ "$out" = "$cached" ]; then
  echo "$want" > "$stamp"
fi
echo "build-image: $image -> $out ($(du -h "$out" | cut -f1))"
