#!/usr/bin/env bash
# Runs every fuzz target for FUZZTIME each (default 3s: the short run
# `make test` does; `make fuzz` runs them longer). Go fuzzes one target of
# one package per invocation. The seeds are in each package's
# testdata/fuzz/<target>/ plus what the targets add themselves (the
# examples, testdata/bad-input); a failing input is written there too, so
# it becomes a regular test case.
set -euo pipefail
cd "$(dirname "$0")/.."
time=${1:-${FUZZTIME:-3s}}
targets=(
  "./pkg/render FuzzParseRender"
  "./pkg/cluster FuzzObserve"
)
for t in "${targets[@]}"; do
  read -r pkg name <<<"$t"
  echo "fuzz: $name ($pkg) for $time"
  # A short minimisation: on a busy machine the default minute spent
  # shrinking each new input leaves little time for fuzzing.
  go test -run '^$' -fuzz "^${name}\$" -fuzztime "$time" -fuzzminimizetime "${FUZZMINIMIZETIME:-2s}" "$pkg"
done
