#!/usr/bin/env bash
# Installs what `make image` needs: mmdebstrap (the image's root filesystem
# from Debian's packages, through the machine's own apt sources). The OCI
# layout is written by hack/ociimage, so neither umoci nor skopeo is needed.
#
#   install-image-tools.sh [ARCH]
#
# For an image of another architecture than the machine's (ARCH=arm64 on
# amd64), the packages' maintainer scripts run under emulation:
# qemu-user-static from Debian, registered with the kernel's binfmt_misc
# (mounted if it is not; the F flag opens the emulator once, so it runs
# inside mmdebstrap's chroot too). The registration is the kernel's, for
# the whole machine, and stays until reboot.
#
# Idempotent: apt runs only when something is missing.
set -euo pipefail
arch=${1:-$(dpkg --print-architecture)}
need=()
command -v mmdebstrap >/dev/null 2>&1 || need+=(mmdebstrap)
qemu=""
if [ "$arch" != "$(dpkg --print-architecture)" ]; then
  # Debian's architecture names are Go's for amd64 and arm64; qemu's are
  # the kernel's.
  case $arch in
    arm64) qemu=aarch64 ;;
    amd64) qemu=x86_64 ;;
    *) echo "install-image-tools: no emulator known for $arch" >&2; exit 1 ;;
  esac
  [ -x "/usr/bin/qemu-$qemu-static" ] || need+=(qemu-user-static)
  command -v arch-test >/dev/null 2>&1 || need+=(arch-test)
fi
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "install-image-tools: ${need[*]} missing and not root; install them or rerun as root" >&2
    exit 1
  fi
  echo "install-image-tools: installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
[ -n "$qemu" ] || exit 0

binfmt=/proc/sys/fs/binfmt_misc
if [ ! -e "$binfmt/register" ]; then
  mount -t binfmt_misc binfmt_misc "$binfmt"
fi
if [ ! -e "$binfmt/qemu-$qemu" ]; then
  echo "install-image-tools: registering qemu-$qemu-static with binfmt_misc"
  # qemu-user-static's own entry, the one systemd-binfmt would register.
  cat "/usr/lib/binfmt.d/qemu-$qemu.conf" > "$binfmt/register"
fi
if ! arch-test "$arch" >/dev/null; then
  echo "install-image-tools: this machine cannot run $arch binaries, even with qemu-$qemu-static registered ($binfmt/qemu-$qemu: $(tr '\n' ' ' < "$binfmt/qemu-$qemu"))" >&2
  exit 1
fi
