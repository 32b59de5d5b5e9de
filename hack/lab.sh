#!/usr/bin/env bash
# The cluster lab by hand, for a demo (docs/lab.md, "The cluster lab"):
#   hack/lab.sh up [HOLD]  start it in the background and wait until it
#                          serves; it is torn down after HOLD (default 8h)
#   hack/lab.sh down       tear it down now and wait until it is gone
# The lab is TestCluster's start, held: state (PID, log, the names of the
# kubeconfig, cluster file and namespaces) lives in bin/lab/.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$PWD/bin/lab
pidfile=$dir/lab.pid
log=$dir/lab.log

running() { [[ -f $pidfile ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null; }

case ${1:-} in
up)
	hold=${2:-8h}
	if running; then
		echo "lab: already up (PID $(cat "$pidfile")); hack/lab.sh down first" >&2
		exit 1
	fi
	mkdir -p "$dir"
	go test -c -o "$dir/e2e.test" ./test/e2e/
	# Its own session, so that a ^C in this shell does not reach it; its
	# teardown runs on SIGTERM (hack/lab.sh down) or when the hold ends.
	(
		cd test/e2e
		VIPCTL_LAB_HOLD=$hold setsid "$dir/e2e.test" \
			-test.run '^TestCluster$' -test.v -test.timeout 0 >"$log" 2>&1 </dev/null &
		echo $! >"$pidfile"
	)
	echo "lab: starting (PID $(cat "$pidfile"), log $log); a cold start takes 2-3 minutes"
	while ! grep -q 'holding the cluster' "$log"; do
		if ! running; then
			echo "lab: failed to start:" >&2
			tail -40 "$log" >&2
			rm -f "$pidfile"
			exit 1
		fi
		sleep 5
	done
	grep -o 'holding the cluster.*' "$log"
	ns=$(grep -o 'client namespace [^ ]*' "$log" | awk '{print $3}')
	kc=$(grep -o "administrator's kubeconfig [^,]*" "$log" | awk '{print $3}')
	cf=$(grep -o 'cluster file [^,]*' "$log" | awk '{print $3}')
	echo
	echo "lab: up. From the client's namespace, for example:"
	echo "  ip netns exec $ns bin/vipctl status -f $cf --kubeconfig $kc"
	echo "lab: tear it down with: make lab-down"
	;;
down)
	if ! running; then
		echo "lab: not running"
		rm -f "$pidfile"
		exit 0
	fi
	pid=$(cat "$pidfile")
	kill -TERM "$pid"
	echo "lab: tearing down (PID $pid)"
	for _ in $(seq 180); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 1
	done
	if kill -0 "$pid" 2>/dev/null; then
		echo "lab: PID $pid still running after 3 minutes; see $log" >&2
		exit 1
	fi
	rm -f "$pidfile"
	echo "lab: down"
	;;
*)
	echo "usage: hack/lab.sh up [HOLD] | down" >&2
	exit 2
	;;
esac
