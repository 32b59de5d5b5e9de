#!/usr/bin/env bash
# The main job on the shipped example: validate it, show its VRRP IDs, and
# render everything the cluster needs (MachineConfigs and every node's
# keepalived/haproxy files for the example node list) into OUT.
set -euo pipefail
vipctl=${1:?vipctl binary}; example=${2:?cluster file}; nodes=${3:?node list}; out=${4:?output dir}
"$vipctl" validate -f "$example"
"$vipctl" vr-ids -f "$example"
"$vipctl" render -f "$example" --nodes "$nodes" --out-dir "$out"
echo
echo "demo: $out/ now holds:"
(cd "$out" && find . -type f ! -name .vipctl-render | sort | sed 's#^\./#  #')
