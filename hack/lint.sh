#!/usr/bin/env bash
# Runs golangci-lint v2, built from its Go module into bin/ (cached: rebuilt
# only when the pinned version changes).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
version=v2.15.0
bin="$root/bin/golangci-lint-$version"
if [ ! -x "$bin" ]; then
  echo "lint: building golangci-lint $version (first time: a few minutes)"
  GOBIN="$root/bin/.golangci" go install "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$version"
  mv "$root/bin/.golangci/golangci-lint" "$bin"
fi
cd "$root"
"$bin" run ./...
