#!/usr/bin/env bash
# Runs make test's go tests (docs/lab.md, "Suites"): the unit tests and
# the namespace lab's test/e2e, in two halves, side by side; then the
# suites that run alone, one after another (the kubelet lab, the cluster
# lab, the guides). hack/testreport reads every go test's JSON from a
# FIFO of its own (whole lines: go test processes writing into one pipe
# could tear each other's long lines), prints what go test would and
# ends with one report; every test's span goes to bin/test-times.tsv.
#
# Why halves: test/e2e's tests run one after another (each times
# failovers against a clock) and held both cores 10-50% busy in r36; one
# after another they took 1509 s of r49's 42.1 minutes. Two at a time
# they share the machine with one other namespace lab, never with the
# cluster lab, which keeps both cores busy. E2E_HALF picks the first
# half by test name; a new test goes to the second unless named for the
# first. The apiserver-only tests (t.Parallel) run at the end of their
# half, four at a time (-parallel 4).
#
# -timeout: a half of test/e2e runs its scenarios in one binary, longer
# together than go test's default of 10 minutes.
#
# Exits non-zero when a go test or the report does.
set -uo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
E2E_HALF=${E2E_HALF:-'^(TestBGP|TestSidecar|TestBootstrap|TestPlanned|TestAlerts)'}
ALONE=(./test/e2e/kubelet/ ./test/e2e/cluster/ ./test/e2e/docs/)

fifos=$(mktemp -d)
trap 'rm -rf "$fifos"' EXIT
streams=(unit e2e-first e2e-second alone)
for s in "${streams[@]}"; do
  mkfifo "$fifos/$s"
done
verbose=()
if [[ " ${GOFLAGS:-} " == *" -v "* ]]; then
  verbose=(-v)
fi
"$GO" build -o bin/testreport ./hack/testreport || exit 1
bin/testreport -times bin/test-times.tsv "${verbose[@]}" "${streams[@]/#/$fifos/}" &
report=$!

mapfile -t unit < <("$GO" list ./... | grep -v -e '/test/e2e$' -e '/test/e2e/kubelet$' -e '/test/e2e/cluster$' -e '/test/e2e/docs$')
status=0
"$GO" test -json -count=1 -parallel 4 -timeout 55m "${unit[@]}" >"$fifos/unit" 2>&1 &
u=$!
"$GO" test -json -count=1 -parallel 4 -timeout 55m -run "$E2E_HALF" ./test/e2e/ >"$fifos/e2e-first" 2>&1 &
a=$!
"$GO" test -json -count=1 -parallel 4 -timeout 55m -skip "$E2E_HALF" ./test/e2e/ >"$fifos/e2e-second" 2>&1 &
b=$!
for p in "$u" "$a" "$b"; do
  wait "$p" || status=1
done
"$GO" test -json -count=1 -p 1 -timeout 40m "${ALONE[@]}" >"$fifos/alone" 2>&1 || status=1
wait "$report" || status=1
exit "$status"
