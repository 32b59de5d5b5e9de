package bootstrap

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vipctl/test/fixture"
)

// TestPrepareRefuses: what cannot work is refused before anything starts,
// naming the field or flag at fault.
func TestPrepareRefuses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	workers := write("workers.yaml", `apiVersion: v1
kind: NodeList
items:
- metadata: {name: worker-0}
  status: {addresses: [{type: InternalIP, address: 198.51.100.21}]}
`)
	taken := write("taken.yaml", `apiVersion: v1
kind: NodeList
items:
- metadata: {name: master-0, labels: {node-role.kubernetes.io/master: ""}}
  status: {addresses: [{type: InternalIP, address: 198.51.100.9}]}
`)
	day1, compact := fixture.Repo("examples/day1-bootstrap.yaml"), fixture.Repo("examples/compact-ipv4.yaml")
	cases := []struct {
		name string
		o    Options
		want string
	}{
		{"no bootstrap host in the config", Options{Config: compact, Nodes: fixture.Repo("examples/nodes/compact.yaml")}, "spec.bootstrap: Required value"},
		{"no control-plane node to yield to", Options{Config: day1, Nodes: workers}, "no control-plane node (label node-role.kubernetes.io/master or control-plane): nobody to give the API VIP to"},
		{"a node has the bootstrap host's address", Options{Config: day1, Nodes: taken}, `spec.bootstrap.addresses[0]: Invalid value: "198.51.100.9": is the address of node master-0`},
		{"no node list", Options{Config: day1, Nodes: filepath.Join(dir, "missing.yaml")}, "--nodes: "},
	}
	for _, tc := range cases {
		if _, err := prepare(tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

// TestCheckServers: haproxy needs the bootstrap machine in the API VIP's
// family, once.
func TestCheckServers(t *testing.T) {
	t.Parallel()
	vip := netip.MustParseAddr("198.51.100.5")
	cases := []struct {
		servers []string
		want    string
	}{
		{nil, ""},
		{[]string{"198.51.100.10"}, ""},
		{[]string{"198.51.100.10", "2001:db8::10"}, ""},
		{[]string{"198.51.100.10", "198.51.100.11"}, "--bootstrap-address 198.51.100.11: a second IPv4 address (one per family)"},
		{[]string{"2001:db8::10"}, "--bootstrap-address: no IPv4 address; haproxy reaches the bootstrap machine in the family of the API VIP 198.51.100.5"},
	}
	for _, tc := range cases {
		_, err := checkServers(fixture.Addrs(tc.servers...), vip)
		if got := errString(err); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.servers, got, tc.want)
		}
	}
}

func TestResultText(t *testing.T) {
	t.Parallel()
	at := func(s string) *time.Time {
		v, err := time.Parse(time.TimeOnly, s)
		if err != nil {
			t.Fatal(err)
		}
		return &v
	}
	r := Result{VIPs: []string{"198.51.100.5"}, Interface: "ens3", ServedAt: at("10:00:00"), YieldedAt: at("10:05:00"), LeftAt: at("10:05:00"), HandoverMillis: 334, StoppedAt: at("10:05:12")}
	want := "served [198.51.100.5] on ens3 from 10:00:00.000\nyielded at 10:05:00.000; a control-plane node held the VIP 334 ms later\nkeepalived and haproxy stopped at 10:05:12.000\n"
	if got := r.Text(); got != want {
		t.Errorf("text:\n%s\nwant:\n%s", got, want)
	}
	if got := (&Result{VIPs: []string{"198.51.100.5"}, AlreadyServed: true}).Text(); !strings.Contains(got, "already answer") {
		t.Errorf("already served: %q", got)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
