#!/usr/bin/env bash
# Regenerates every golden file and generated doc. verify.sh runs this and
# fails when the tree changes.
set -euo pipefail
cd "$(dirname "$0")/.."
go test -count=1 ./internal/cli/... ./pkg/render/... ./pkg/manifests/... ./pkg/update/... ./pkg/dnsrecords/... ./pkg/bundle/... -run Golden -update >/dev/null
go run ./hack/gendocs docs/config-reference.md
