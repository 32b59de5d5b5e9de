#!/usr/bin/env bash
# Runs every fuzz target for FUZZTIME each (default 3s: the short run
# `make test` does; `make fuzz` runs them longer). Go fuzzes one target of
# one package per invocation. The seeds are in each package's
# testdata/fuzz/<target>/ plus what the targets add themselves (the
# examples, testdata/bad-input); a failing input is written there too, so
# it becomes a regular test case.
#
# Go 1.26's fuzz coordinator can fail a target with a bare "context
# deadline exceeded" when -fuzztime ends while a worker is busy, having
# found nothing (golang/go#75804, fixed in Go 1.27; a CI rehearsal hit it,
# 2026-11-27). Such a run, with no new failing input written, is reported
# as that race and does not fail; any other failure, or any new input in
# testdata/fuzz/<target>/, does.
set -euo pipefail
cd "$(dirname "$0")/.."
time=${1:-${FUZZTIME:-3s}}
targets=(
  "./pkg/render FuzzParseRender"
  "./pkg/cluster FuzzObserve"
  "./pkg/nodelist FuzzNodeList"
  "./pkg/nodelist FuzzInstallerFiles"
  "./pkg/installercheck FuzzCrossCheck"
  "./pkg/vrid FuzzInventory"
  "./pkg/hostfirewall FuzzCheck"
)
for t in "${targets[@]}"; do
  read -r pkg name <<<"$t"
  echo "fuzz: $name ($pkg) for $time"
  corpus="$pkg/testdata/fuzz/$name"
  before=$(ls "$corpus" 2>/dev/null | sort || true)
  out=$(mktemp)
  # A short minimisation: on a busy machine the default minute spent
  # shrinking each new input leaves little time for fuzzing.
  if go test -run '^$' -fuzz "^${name}\$" -fuzztime "$time" -fuzzminimizetime "${FUZZMINIMIZETIME:-2s}" "$pkg" 2>&1 | tee "$out"; then
    rm -f "$out"
    continue
  fi
  after=$(ls "$corpus" 2>/dev/null | sort || true)
  failures=$(grep -A1 -- "^--- FAIL: $name " "$out" | tail -n +2 | sed 's/^[[:space:]]*//' || true)
  rm -f "$out"
  if [ "$before" = "$after" ] && [ "$failures" = "context deadline exceeded" ]; then
    echo "fuzz: $name: Go's fuzz coordinator raced its own deadline (golang/go#75804), no failing input found: not a failure"
    continue
  fi
  echo "fuzz: $name failed" >&2
  exit 1
done
