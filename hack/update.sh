#!/usr/bin/env bash
# Regenerates every golden file and generated doc. verify.sh runs this and
# fails when the tree changes.
set -euo pipefail
cd "$(dirname "$0")/.."
go test -count=1 ./internal/cli/... ./pkg/render/... ./pkg/manifests/... ./pkg/update/... ./pkg/dnsrecords/... ./pkg/bundle/... -run Golden -update >/dev/null
go run ./hack/gendocs docs/config-reference.md
# The ClusterVIPs CRD from pkg/apis/v1alpha1/crd (docs/api.md). controller-gen
# runs at a pinned release from its own module, so vipctl's go.mod stays as
# it is; the first run downloads and builds it.
rm -f pkg/manifests/crds/*.yaml
go run sigs.k8s.io/controller-tools/cmd/controller-gen@v0.23.0 crd:crdVersions=v1 paths=./pkg/apis/v1alpha1/crd/... output:crd:dir=pkg/manifests/crds
