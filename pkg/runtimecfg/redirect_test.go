package runtimecfg

import (
	"testing"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/dataplane"
	"github.com/vipctl/vipctl/pkg/host"
	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/pkg/render"
	"github.com/vipctl/vipctl/test/netlab"
)

// TestRedirectsWaitForHaproxy: on a control-plane node whose pods start
// after a boot (AwaitHaproxy), the API redirect is not written while
// haproxy does not listen: the node's own client of VIP:6443 is not sent
// to a closed port (it was: refused, the cluster lab's kubelet for 1.5–3
// s at each reboot, 2026-11-30). Once haproxy listens the next Reconcile
// writes it and the client reaches haproxy; it stays when haproxy stops.
// A restarted sidecar that finds a table that redirects while haproxy is
// down leaves it; without AwaitHaproxy (the bootstrap host, the labs'
// init) the redirect is written at once, as before.
func TestRedirectsWaitForHaproxy(t *testing.T) {
	c, err := v1alpha1.Load("../../examples/compact-ipv4.yaml")
	if err != nil {
		t.Fatal(err)
	}
	lab := netlab.New(t)
	node := lab.AddHost("node", netlab.HostOpts{Iface: "br-ex", Addrs: []string{"198.51.100.11/24"}})
	node.MustExec("ip", "addr", "add", "198.51.100.5/32", "dev", "br-ex")
	node.ServeText(t, ":6443", "apiserver")
	target := host.Target{Netns: node.NS}
	cp := NodeState{Files: []onnode.File{{Path: onnode.HaproxyConfPath}}, Redirects: render.APIRedirects(cluster.Compile(c))}
	const vipURL = "http://198.51.100.5:6443/"
	redirecting := func() bool {
		t.Helper()
		has, err := dataplane.HasRedirects(target)
		if err != nil {
			t.Fatal(err)
		}
		return has
	}

	n := NewNode(target, "node", nil)
	n.AwaitHaproxy = true
	for range 2 {
		if waiting, err := n.redirect(c, cp); err != nil || !waiting {
			t.Fatalf("haproxy not listening: waiting %t, %v; want waiting", waiting, err)
		}
		if redirecting() {
			t.Fatal("a redirect written while haproxy does not listen")
		}
		if got := node.Get(vipURL); got != "apiserver" {
			t.Errorf("VIP:6443 from the node while haproxy is down: %q, want the apiserver (no redirect)", got)
		}
	}
	stop := node.ServeText(t, ":9445", "haproxy")
	if waiting, err := n.redirect(c, cp); err != nil || waiting {
		t.Fatalf("haproxy listening: waiting %t, %v; want the redirect written", waiting, err)
	}
	if got := node.Get(vipURL); got != "haproxy" || !redirecting() {
		t.Errorf("VIP:6443 from the node once haproxy listens: %q, redirecting %t; want haproxy", got, redirecting())
	}
	stop()
	n.redirected = "" // as if the config changed: the table is written again
	if waiting, err := n.redirect(c, cp); err != nil || waiting || !redirecting() {
		t.Errorf("haproxy stopped after it listened: waiting %t, redirecting %t, %v; want the redirect kept", waiting, redirecting(), err)
	}

	restarted := NewNode(target, "node", nil)
	restarted.AwaitHaproxy = true
	if waiting, err := restarted.redirect(c, cp); err != nil || !waiting || !redirecting() {
		t.Errorf("a restarted sidecar, haproxy down: waiting %t, redirecting %t, %v; want the table left redirecting", waiting, redirecting(), err)
	}

	if err := dataplane.ApplyRedirects(target, nil, nil); err != nil {
		t.Fatal(err)
	}
	bootstrap := NewNode(target, "node", nil)
	if waiting, err := bootstrap.redirect(c, cp); err != nil || waiting || !redirecting() {
		t.Errorf("without AwaitHaproxy: waiting %t, redirecting %t, %v; want the redirect written at once", waiting, redirecting(), err)
	}
	if got := node.Get(vipURL); got != "refused" {
		t.Errorf("VIP:6443 from the node, redirected to a haproxy that is down: %q, want refused", got)
	}
}
