#!/usr/bin/env bash
# gobuild-cached.sh KEY OUT GO-BUILD-ARGS...: `go build -o OUT ARGS` in the
# current directory, unless a binary built under KEY (the hash of every
# input the caller knows: go.mod, go.sum, sources) is kept in the Go cache
# directory, which a fresh clone on this machine shares; then it is copied.
# A fresh clone's bin/ is empty, and linking the Kubernetes binaries alone
# takes about 20 s each on two cores even with every package compiled.
set -euo pipefail
key=$1 out=$2
shift 2
kept="$(go env GOCACHE)/vipctl-bin/$key/$(basename "$out")"
if [ -x "$kept" ]; then
  cp "$kept" "$out.tmp" && mv "$out.tmp" "$out"
  exit 0
fi
go build -o "$out" "$@"
mkdir -p "$(dirname "$kept")"
cp "$out" "$kept.tmp" && mv "$kept.tmp" "$kept"
