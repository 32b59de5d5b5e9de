package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vipctl/vipctl/pkg/dnsrecords"
	"github.com/vipctl/vipctl/test/lab"
	"github.com/vipctl/vipctl/test/netlab"
)

const dnsCluster = `apiVersion: vipctl.io/v1alpha1
kind: ClusterVIPs
metadata: {name: lab}
spec:
  baseDomain: example.test
  machineNetworks: [198.51.100.0/24, "2001:db8:100::/64"]
  api: {vips: [198.51.100.5, "2001:db8:100::5"]}
  ingress:
  - {name: default, vips: [198.51.100.6, "2001:db8:100::6"]}
  - {name: partners, domain: partners.lab.example.test, vips: [198.51.100.7]}
`

// dnsTeamsTypos is a zone a DNS team made by hand from the ticket, with
// what goes wrong in such zones: api-int as an alias of api (fine), the
// wildcard of apps at a wrong address and without its IPv6 record, and
// an IPv6 record for an IPv4-only shard.
const dnsTeamsTypos = `api.lab.example.test. 300 IN A 198.51.100.5
api.lab.example.test. 300 IN AAAA 2001:db8:100::5
api-int.lab.example.test. 300 IN CNAME api.lab.example.test.
*.apps.lab.example.test. 300 IN A 198.51.100.66
*.partners.lab.example.test. 300 IN A 198.51.100.7
*.partners.lab.example.test. 300 IN AAAA 2001:db8:100::7
`

// TestDNSCheck: the records.zone `vipctl render` writes, loaded as it is
// into a real DNS server (Debian's named; named-checkzone judges it
// first), satisfies `vipctl dns check` over IPv4 and IPv6 (exit 0, every
// record ok, the wildcards asked for by a name under them); a zone with
// a wrong, a missing and an unexpected record gets each named (exit 2)
// while an alias to the right addresses passes; and a server that does
// not answer is an error (exit 1), not a finding.
func TestDNSCheck(t *testing.T) {
	vipctl := requireVipctl(t)
	l := netlab.New(t)
	server := l.AddHost("dns", netlab.HostOpts{Iface: "eth0", Addrs: []string{"198.51.100.53/24", "2001:db8:100::53/64"}})
	client := l.AddHost("admin", netlab.HostOpts{Iface: "eth0", Addrs: []string{"198.51.100.100/24", "2001:db8:100::100/64"}})
	dir := t.TempDir()
	cfg := filepath.Join(dir, "cluster.yaml")
	writeFile(t, cfg, []byte(dnsCluster))
	out := filepath.Join(dir, "out")
	if b, err := exec.Command(vipctl, "render", "-f", cfg, "--out-dir", out).CombinedOutput(); err != nil {
		t.Fatalf("vipctl render: %v\n%s", err, b)
	}
	zone, err := os.ReadFile(filepath.Join(out, "dns", "records.zone"))
	if err != nil {
		t.Fatal(err)
	}
	listen := []string{"198.51.100.53", "2001:db8:100::53"}

	named := lab.StartDNS(t, server, "example.test", listen, zone)
	for _, addr := range listen {
		rep, code, stderr := runDNSCheck(t, client, vipctl, cfg, addr)
		if code != 0 {
			t.Errorf("rendered zone via %s: exit %d, want 0: %s", addr, code, stderr)
		}
		want := []dnsrecords.Result{
			ok("api.lab.example.test.", "api.lab.example.test.", "A", "198.51.100.5"),
			ok("api.lab.example.test.", "api.lab.example.test.", "AAAA", "2001:db8:100::5"),
			ok("api-int.lab.example.test.", "api-int.lab.example.test.", "A", "198.51.100.5"),
			ok("api-int.lab.example.test.", "api-int.lab.example.test.", "AAAA", "2001:db8:100::5"),
			ok("*.apps.lab.example.test.", "vipctl-dns-check.apps.lab.example.test.", "A", "198.51.100.6"),
			ok("*.apps.lab.example.test.", "vipctl-dns-check.apps.lab.example.test.", "AAAA", "2001:db8:100::6"),
			ok("*.partners.lab.example.test.", "vipctl-dns-check.partners.lab.example.test.", "A", "198.51.100.7"),
		}
		if !equalJSON(t, rep.Results, want) {
			t.Errorf("rendered zone via %s: results %+v, want %+v", addr, rep.Results, want)
		}
	}
	named.Stop()

	named = lab.StartDNS(t, server, "example.test", listen, []byte(dnsTeamsTypos))
	rep, code, stderr := runDNSCheck(t, client, vipctl, cfg, listen[0])
	if code != 2 {
		t.Errorf("zone with typos: exit %d, want 2", code)
	}
	var bad []string
	for _, r := range rep.Results {
		if r.Status != dnsrecords.StatusOK {
			bad = append(bad, r.Name+" "+r.Type+" "+r.Status+" got "+strings.Join(r.Got, ","))
		}
	}
	wantBad := []string{
		"*.apps.lab.example.test. A wrong got 198.51.100.66",
		"*.apps.lab.example.test. AAAA missing got ",
		"*.partners.lab.example.test. AAAA unexpected got 2001:db8:100::7",
	}
	if strings.Join(bad, "\n") != strings.Join(wantBad, "\n") {
		t.Errorf("zone with typos: findings\n%s\nwant\n%s", strings.Join(bad, "\n"), strings.Join(wantBad, "\n"))
	}
	for _, p := range wantBad {
		name := strings.Fields(p)[0]
		if !strings.Contains(stderr, name) {
			t.Errorf("stderr does not name %s: %s", name, stderr)
		}
	}
	if len(rep.Results) != 8 {
		t.Errorf("zone with typos: %d results, want 8 (api-int's alias ok in both families)", len(rep.Results))
	}
	named.Stop()

	_, code, stderr = runDNSCheck(t, client, vipctl, cfg, listen[0], "--timeout", "200ms")
	if code != 1 || !strings.Contains(stderr, "did not answer") {
		t.Errorf("no server: exit %d, stderr %q; want 1 and \"did not answer\"", code, stderr)
	}
}

func ok(name, queried, typ, addr string) dnsrecords.Result {
	return dnsrecords.Result{Name: name, Queried: queried, Type: typ, Status: dnsrecords.StatusOK, Want: []string{addr}, Got: []string{addr}}
}

// runDNSCheck runs vipctl dns check -o json on h against server and
// returns its report, exit status and stderr.
func runDNSCheck(t *testing.T, h *netlab.Host, vipctl, cfg, server string, extra ...string) (dnsrecords.Report, int, string) {
	t.Helper()
	var r dnsrecords.Report
	code, stderr := execJSON(t, h, &r, append([]string{vipctl, "dns", "check", "-f", cfg, "--server", server, "-o", "json"}, extra...)...)
	return r, code, stderr
}
