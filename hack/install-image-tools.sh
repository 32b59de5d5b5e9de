#!/usr/bin/env bash
# Installs what `make image` needs: mmdebstrap (the image's root filesystem
# from Debian's packages, through the machine's own apt sources). The OCI
# layout is written by hack/ociimage, so neither umoci nor skopeo is needed.
# Idempotent: apt runs only when mmdebstrap is missing.
set -euo pipefail
command -v mmdebstrap >/dev/null 2>&1 && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "install-image-tools: mmdebstrap missing and not root; install it or rerun as root" >&2
  exit 1
fi
echo "install-image-tools: installing mmdebstrap"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends mmdebstrap >/dev/null
