package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vipctl/vipctl/pkg/preflight"
	"github.com/vipctl/vipctl/test/fixture"
	"github.com/vipctl/vipctl/test/netlab"
)

const preflightCluster = `apiVersion: vipctl.io/v1alpha1
kind: ClusterVIPs
metadata: {name: lab}
spec:
  baseDomain: example.test
  machineNetworks: [198.51.100.0/24, "2001:db8:100::/64"]
  api: {vips: [198.51.100.5, "2001:db8:100::5"]}
  ingress: [{name: default, vips: [198.51.100.6, "2001:db8:100::6"]}]
  servicePools: [{name: small, addresses: [198.51.100.200-198.51.100.203]}]
`

// TestPreflightFindsHolders runs the real `vipctl preflight` in network
// namespaces: a host that holds the API VIPs (IPv4 and IPv6, as an old
// load balancer would) is named with its MAC and the command exits 2; a
// host holding no VIP on the same segment is never named; once the VIPs
// are taken off the holder, nobody answers and it exits 0; run on the
// holder itself, it says this host holds them.
func TestPreflightFindsHolders(t *testing.T) {
	vipctl := requireVipctl(t)
	l := netlab.New(t)
	prober := l.AddHost("prober", netlab.HostOpts{Iface: "eth0", Addrs: []string{"198.51.100.100/24", "2001:db8:100::100/64"}})
	holder := l.AddHost("holder", netlab.HostOpts{Iface: "eth0", Addrs: []string{"198.51.100.20/24", "198.51.100.5/32", "2001:db8:100::20/64", "2001:db8:100::5/128"}})
	bystander := l.AddHost("bystander", netlab.HostOpts{Iface: "eth0", Addrs: []string{"198.51.100.21/24", "2001:db8:100::21/64"}})
	cfg := filepath.Join(t.TempDir(), "cluster.yaml")
	writeFile(t, cfg, []byte(preflightCluster))
	holderMAC, bystanderMAC := macOf(t, holder), macOf(t, bystander)

	report, code := runPreflight(t, prober, vipctl, cfg)
	if code != 2 {
		t.Errorf("VIPs held: exit %d, want 2", code)
	}
	if report.Asked != 8 {
		t.Errorf("asked for %d addresses, want 8 (2 API, 2 ingress, 4 pool)", report.Asked)
	}
	want := []preflight.Result{
		{Address: "198.51.100.5", Field: "spec.api.vips[0]", AnsweredBy: []string{holderMAC}},
		{Address: "2001:db8:100::5", Field: "spec.api.vips[1]", AnsweredBy: []string{holderMAC}},
	}
	if !equalJSON(t, report.Held, want) {
		t.Errorf("held %+v, want %+v (the holder %s; the bystander %s holds nothing)", report.Held, want, holderMAC, bystanderMAC)
	}

	// The old load balancer lets the VIPs go.
	holder.MustExec("ip", "addr", "del", "198.51.100.5/32", "dev", "eth0")
	holder.MustExec("ip", "addr", "del", "2001:db8:100::5/128", "dev", "eth0")
	report, code = runPreflight(t, prober, vipctl, cfg)
	if code != 0 || len(report.Held) != 0 {
		t.Errorf("no VIP held: exit %d, held %+v; want 0 and none", code, report.Held)
	}

	// Run on a host that holds one itself: the kernel does not answer
	// its own requests, the local addresses say it.
	prober.MustExec("ip", "addr", "add", "198.51.100.6/32", "dev", "eth0")
	report, code = runPreflight(t, prober, vipctl, cfg)
	local := []preflight.Result{{Address: "198.51.100.6", Field: "spec.ingress[0].vips[0]", Local: true}}
	if code != 2 || !equalJSON(t, report.Held, local) {
		t.Errorf("held by the prober itself: exit %d, held %+v, want %+v", code, report.Held, local)
	}
}

// runPreflight runs vipctl preflight -o json on h and returns its report
// and exit status.
func runPreflight(t *testing.T, h *netlab.Host, vipctl, cfg string) (preflight.Report, int) {
	t.Helper()
	var r preflight.Report
	code, _ := execJSON(t, h, &r, vipctl, "preflight", "-f", cfg, "--interface", "eth0", "-o", "json")
	return r, code
}

// macOf is the MAC address of h's interface.
func macOf(t *testing.T, h *netlab.Host) string {
	t.Helper()
	fields := strings.Fields(string(h.MustExec("cat", "/sys/class/net/"+h.Iface+"/address")))
	if len(fields) != 1 {
		t.Fatalf("%s: no MAC address", h.Name)
	}
	return fields[0]
}

// requireVipctl is the path of bin/vipctl, which the tests that run the
// real command need built (make build; make test does).
func requireVipctl(t *testing.T) string {
	t.Helper()
	vipctl := fixture.Repo("bin/vipctl")
	if _, err := os.Stat(vipctl); err != nil {
		t.Fatalf("bin/vipctl not built (make build; make test does): %v", err)
	}
	return vipctl
}
