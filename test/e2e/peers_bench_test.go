package e2e

import (
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vipctl/vipctl/test/fixture"
	"github.com/vipctl/vipctl/test/lab"
	"github.com/vipctl/vipctl/test/netlab"
	"github.com/vipctl/vipctl/test/testapiserver"
)

var peerTrials = flag.Int("peer-trials", 5, "peers benchmark: trials per peer and case")

// BenchmarkPeers measures vipctl and its peers side by side: the same
// three nodes on one segment, the same client (a new connection every
// 10 ms, 250 ms timeout, answered by an echo server on every node that
// names it), the same faults (the holder's switch port dropped; the
// agent killed with SIGKILL; the planned move, peerCases). One line per
// peer, settings and case:
//
//	peers peer=P version=V settings=S case=C trials=N median_ms=X p95_ms=Y max_ms=Z failed_requests=F
//
// The outage runs from the fault to the first answer from another node;
// for the planned move it is the longest run of failed requests.
// vipctl runs its process lab (BenchmarkFailover's trial) with both
// profiles; kube-vip (hack/build-peers.sh, the version pinned in
// hack/peers.env) runs as a process in each node's namespace the way its
// docs configure a control-plane VIP: ARP, Kubernetes leader election
// with its default lease timings, and the control plane's admin
// kubeconfig, reaching the apiserver across the lab's switch, so a node
// cut off the segment is cut off the API as on a real network.
//
// Run with `make bench-peers`. It prints; docs/benchmarks.md judges.
func BenchmarkPeers(b *testing.B) {
	kubeVIP, kubeVIPVersion := peerBinary(b, "kube-vip")
	for _, profile := range []string{"default", "fast"} {
		for _, c := range peerCases {
			scenario := c
			if c == "agent-kill" {
				scenario = "keepalived-kill"
			}
			peerCase(b, "vipctl", vipctlVersion(), "profile="+profile, c, func(b *testing.B, i int) (time.Duration, int) {
				return failoverTrial(b, profile, scenario, i)
			})
		}
	}
	for _, c := range peerCases {
		peerCase(b, "kube-vip", kubeVIPVersion, "lease=5s/renew=3s/retry=1s", c, func(b *testing.B, i int) (time.Duration, int) {
			return kubeVIPTrial(b, kubeVIP, c, i)
		})
	}
}

// peerCases are the faults every peer meets: the holder lost, its agent
// killed, and the planned move off it by the peer's own maintenance
// path (vipctl: the node drained, as the keepalived pod's preStop does;
// kube-vip, which has no drain: its pod stopped, SIGTERM, after which it
// gives its Lease up).
var peerCases = []string{"node-loss", "agent-kill", "planned"}

// peerCase runs -peer-trials trials of one peer's case as a
// sub-benchmark and prints its line.
func peerCase(b *testing.B, peer, version, settings, scenario string, trial func(*testing.B, int) (time.Duration, int)) {
	name := peer + "/" + scenario
	if strings.HasPrefix(settings, "profile=") {
		name = peer + "/" + strings.TrimPrefix(settings, "profile=") + "/" + scenario
	}
	b.Run(name, func(b *testing.B) {
		outages, failed := runTrials(*peerTrials, func(i int) (time.Duration, int) { return trial(b, i) })
		printPeer(b, peer, version, settings, scenario, outages, failed)
	})
}

// printPeer prints one line of BenchmarkPeers; none for a case whose
// trials failed, whose numbers would mean nothing.
func printPeer(b *testing.B, peer, version, settings, scenario string, outages []time.Duration, failed int) {
	if b.Failed() {
		return
	}
	fmt.Fprintf(os.Stdout, "peers peer=%s version=%s settings=%s case=%s %s\n", peer, version, settings, scenario, outageFields(outages, failed))
}

// vipctlVersion is the commit the benchmark runs (with -dirty for
// uncommitted changes), as make build stamps vipctl; "unknown" outside a
// git checkout.
func vipctlVersion() string {
	out, err := exec.Command("git", "-C", fixture.Repo(""), "describe", "--always", "--dirty").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

// peerBinary is a peer's binary in bin/ and the version
// hack/build-peers.sh stamped it with. A peer that is not built fails
// the benchmark: a comparison with a peer missing is not one.
func peerBinary(b *testing.B, name string) (path, version string) {
	b.Helper()
	path = fixture.Repo("bin/" + name)
	if _, err := os.Stat(path); err != nil {
		b.Fatalf("%s not built: run hack/build-peers.sh (make bench-peers does): %v", name, err)
	}
	v, err := os.ReadFile(fixture.Repo("bin/." + name + "-version"))
	if err != nil {
		b.Fatalf("%s has no version stamp: run hack/build-peers.sh again: %v", name, err)
	}
	return path, strings.TrimSpace(string(v))
}

// kubeVIPAPIAddr is where the lab's nodes reach the apiserver: a host on
// the segment forwarding to the test apiserver, as a node reaches its
// cluster's API over the network.
const kubeVIPAPIAddr = "198.51.100.250"

// kubeVIPTrial builds three nodes running kube-vip for the API VIP (a
// fresh apiserver and lab per trial, so trials share no lease), injects
// the fault into the holder and returns the outage and the failed
// requests.
func kubeVIPTrial(b *testing.B, bin, scenario string, i int) (time.Duration, int) {
	var outage time.Duration
	var failed int
	b.Run(fmt.Sprintf("trial-%d", i), func(t *testing.B) {
		api := testapiserver.Start(t)
		l := netlab.New(t)
		gw := l.AddHost("api", netlab.HostOpts{Addrs: []string{kubeVIPAPIAddr + "/24"}})
		relayTCP(gw, net.JoinHostPort(kubeVIPAPIAddr, "6443"), strings.TrimPrefix(api.URL, "https://"))
		client := l.AddHost("client", netlab.HostOpts{Addrs: []string{"198.51.100.100/24"}})

		// The admin kubeconfig a control-plane node's kube-vip static pod
		// mounts, pointed at the API across the segment. The apiserver's
		// serving certificate names 127.0.0.1, not the forwarder. kube-vip
		// reads /etc/kubernetes/admin.conf or else $HOME/.kube/config (its
		// --k8sConfigPath is not what the manager reads): the lab gives it
		// a HOME of its own.
		cfg := api.AdminConfig()
		cfg.Host = "https://" + net.JoinHostPort(kubeVIPAPIAddr, "6443")
		cfg.ServerName = "127.0.0.1"
		home := lab.SharedDir(t, "kube-vip")
		if err := os.MkdirAll(filepath.Join(home, ".kube"), 0o700); err != nil {
			t.Fatal(err)
		}
		testapiserver.WriteKubeconfig(t, cfg, filepath.Join(home, ".kube", "config"))

		// The forwarder answers across the segment before any agent
		// depends on it.
		if out, err := client.Exec("curl", "-sS", "--max-time", "5", "--cacert", caFile(t, home, cfg.CAData),
			"--connect-to", "127.0.0.1:6443:"+kubeVIPAPIAddr+":6443", "https://127.0.0.1:6443/readyz"); err != nil {
			t.Fatalf("the API through %s: %v: %s", kubeVIPAPIAddr, err, out)
		}
		probe := lab.BuildProbe(t)
		hosts := map[string]*netlab.Host{}
		agents := map[string]*netlab.Proc{}
		for n := 0; n < 3; n++ {
			name := fmt.Sprintf("master-%d", n)
			h := l.AddHost(name, netlab.HostOpts{Addrs: []string{fmt.Sprintf("198.51.100.%d/24", 11+n)}})
			hosts[name] = h
			lab.StartEchoProcess(t, probe, h, "0.0.0.0:8080", name)
			// kube-vip's documented control-plane settings (its manifest
			// generator's vip_arp, cp_enable, vip_leaderelection with
			// the default 5/3/1 s lease), as flags.
			agents[name] = h.Start("kube-vip", "env", "HOME="+home, bin, "manager",
				"--interface", "br-ex", "--address", apiVIP, "--vipSubnet", "32", "--port", "6443",
				"--arp", "--controlplane", "--leaderElection",
				"--leaseDuration", "5", "--leaseRenewDuration", "3", "--leaseRetry", "1",
				"--nodeName", name,
				"--prometheusHTTPServer", "")
		}
		t.Cleanup(func() {
			if t.Failed() {
				for name, p := range agents {
					t.Logf("--- %s kube-vip log:\n%s", name, p.LogTail(30))
				}
			}
		})
		holder := waitOneHolder(t, hosts, apiVIP, 60*time.Second)
		w := lab.StartPolling(client, "http://"+apiVIP+":8080/", 10*time.Millisecond, lab.PollTimeout, true)
		lab.WaitFor(t, 10*time.Second, "answers", func() bool { ok, _ := w.Counts(); return ok > 20 })
		fault := time.Now()
		switch scenario {
		case "node-loss":
			hosts[holder].LinkDown()
		case "agent-kill":
			if err := agents[holder].Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		case "planned":
			if err := agents[holder].Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
		}
		// A planned move counts as BenchmarkFailover counts it: the
		// longest run of failures.
		outage, failed = moveOutage(t, w, holder, fault, scenario == "planned", 60*time.Second)
	})
	return outage, failed
}

// caFile writes the apiserver's CA to dir for curl, and returns its path.
func caFile(t testing.TB, dir string, pem []byte) string {
	t.Helper()
	p := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(p, pem, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// waitOneHolder waits until exactly one of hosts carries vip on br-ex
// and returns its name.
func waitOneHolder(t testing.TB, hosts map[string]*netlab.Host, vip string, timeout time.Duration) string {
	t.Helper()
	var holder string
	lab.WaitFor(t, timeout, vip+" held by one node", func() bool {
		var have []string
		for name, h := range hosts {
			out, err := h.Exec("ip", "-o", "addr", "show", "dev", "br-ex")
			if err == nil && strings.Contains(string(out), " "+vip+"/") {
				have = append(have, name)
			}
		}
		if len(have) == 1 {
			holder = have[0]
		}
		return len(have) == 1
	})
	return holder
}
