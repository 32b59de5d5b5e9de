package bootstrap

import (
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vipctl/pkg/cluster"
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
  status: {addresses: [{type: InternalIP, address: 198.51.100.11}]}
- metadata: {name: worker-0}
  status: {addresses: [{type: InternalIP, address: 198.51.100.9}]}
`)
	alone := write("alone.yaml", `apiVersion: v1
kind: NodeList
items:
- metadata: {name: master-0, labels: {node-role.kubernetes.io/master: ""}}
  status: {addresses: [{type: InternalIP, address: 198.51.100.9}]}
- metadata: {name: worker-0}
  status: {addresses: [{type: InternalIP, address: 198.51.100.21}]}
`)
	day1, compact := fixture.Repo("examples/day1-bootstrap.yaml"), fixture.Repo("examples/compact-ipv4.yaml")
	cases := []struct {
		name string
		o    Options
		want string
	}{
		{"no bootstrap host in the config", Options{Config: compact, Nodes: fixture.Repo("examples/nodes/compact.yaml")}, "spec.bootstrap: Required value"},
		{"no control-plane node to yield to", Options{Config: day1, Nodes: workers}, "no control-plane node (label node-role.kubernetes.io/master or control-plane): nobody to give the API VIP to"},
		{"a worker has the bootstrap host's address", Options{Config: day1, Nodes: taken}, `spec.bootstrap.addresses[0]: Invalid value: "198.51.100.9": is the address of node worker-0, which is no control-plane node`},
		{"in place, no other control-plane node", Options{Config: day1, Nodes: alone}, "no control-plane node but master-0, the node this host reboots into (spec.bootstrap names its address: an in-place bootstrap): nobody to give the API VIP to before the reboot"},
		{"no node list", Options{Config: day1, Nodes: filepath.Join(dir, "missing.yaml")}, "--nodes: "},
	}
	for _, tc := range cases {
		if _, err := prepare(tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

// TestYieldTargets: in place (the agent-based installer's rendezvous host
// bootstraps and reboots into master-0), the VIP goes to the other
// control-plane nodes only: master-0's haproxy port is this host's own.
func TestYieldTargets(t *testing.T) {
	t.Parallel()
	nodes := []cluster.Node{
		{Name: "master-0", ControlPlane: true, Addresses: fixture.Addrs("198.51.100.11", "2001:db8:100::11")},
		{Name: "master-1", ControlPlane: true, Addresses: fixture.Addrs("198.51.100.12", "2001:db8:100::12")},
		{Name: "worker-0", Addresses: fixture.Addrs("198.51.100.21")},
	}
	names := func(ns []cluster.Node) (out []string) {
		for _, n := range ns {
			out = append(out, n.Name)
		}
		return out
	}
	cases := []struct {
		name      string
		bootstrap []string
		masters   []string
		inPlace   string
	}{
		{"a bootstrap machine of its own", []string{"198.51.100.9"}, []string{"master-0", "master-1"}, ""},
		{"in place of master-0", []string{"198.51.100.11", "2001:db8:100::11"}, []string{"master-1"}, "master-0"},
		{"in place, by its IPv6 address alone", []string{"2001:db8:100::11"}, []string{"master-1"}, "master-0"},
	}
	for _, tc := range cases {
		var own []netip.Addr
		for _, a := range tc.bootstrap {
			own = append(own, netip.MustParseAddr(a))
		}
		masters, inPlace := yieldTargets(nodes, own)
		if got := names(masters); !slices.Equal(got, tc.masters) || inPlace != tc.inPlace {
			t.Errorf("%s: %v in place of %q, want %v in place of %q", tc.name, got, inPlace, tc.masters, tc.inPlace)
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
		if got := fixture.ErrText(err); got != tc.want {
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
	r.InPlace = "master-0"
	if got, want := r.Text(), "in place: this host is node master-0 after its reboot\n"+want; got != want {
		t.Errorf("in place:\n%s\nwant:\n%s", got, want)
	}
}

// good is a set of options Validate accepts, for cases to break one by one.
func good() Options {
	return Options{Config: "cluster.yaml", Nodes: "nodes.yaml", Dir: DefaultDir, YieldAfter: DefaultYieldAfter, Grace: 10 * time.Second}
}

// TestOptionsValidate: every flag is checked on its own before anything
// is read or started, each problem naming its flag, all at once.
func TestOptionsValidate(t *testing.T) {
	t.Parallel()
	with := func(edit func(*Options)) Options {
		o := good()
		edit(&o)
		return o
	}
	cases := []struct {
		name string
		o    Options
		want string
	}{
		{"the defaults", good(), ""},
		{"the bootstrap machine's address in each family", with(func(o *Options) { o.Servers = fixture.Addrs("198.51.100.10", "2001:db8:100::10") }), ""},
		{"a negative --yield-after", with(func(o *Options) { o.YieldAfter = -time.Second }),
			"--yield-after -1s: must be positive: how long the control-plane nodes must answer without a break before they get the VIP"},
		{"a zero --yield-after", with(func(o *Options) { o.YieldAfter = 0 }),
			"--yield-after 0s: must be positive: how long the control-plane nodes must answer without a break before they get the VIP"},
		{"a negative --grace", with(func(o *Options) { o.Grace = -5 * time.Second }),
			"--grace -5s: must be positive: how long the connections accepted here are served after the VIP left; without it they are reset"},
		{"--bootstrap-address 0.0.0.0", with(func(o *Options) { o.Servers = fixture.Addrs("0.0.0.0") }),
			"--bootstrap-address 0.0.0.0: the unspecified address names no host: give the bootstrap machine's address (or leave the flag out on the bootstrap machine itself)"},
		{"--bootstrap-address ::", with(func(o *Options) { o.Servers = fixture.Addrs("::") }),
			"--bootstrap-address ::: the unspecified address names no host: give the bootstrap machine's address (or leave the flag out on the bootstrap machine itself)"},
		{"a loopback --bootstrap-address", with(func(o *Options) { o.Servers = fixture.Addrs("127.0.0.2") }),
			"--bootstrap-address 127.0.0.2: a loopback address: haproxy would balance onto this host, and the control-plane nodes could not reach it either"},
		{"IPv6 loopback", with(func(o *Options) { o.Servers = fixture.Addrs("::1") }),
			"--bootstrap-address ::1: a loopback address: haproxy would balance onto this host, and the control-plane nodes could not reach it either"},
		{"a multicast --bootstrap-address", with(func(o *Options) { o.Servers = fixture.Addrs("224.0.0.18") }),
			"--bootstrap-address 224.0.0.18: a multicast address names no host"},
		{"the broadcast address", with(func(o *Options) { o.Servers = fixture.Addrs("255.255.255.255") }),
			"--bootstrap-address 255.255.255.255: the broadcast address names no host"},
		{"IPv6 link-local", with(func(o *Options) { o.Servers = fixture.Addrs("fe80::1") }),
			"--bootstrap-address fe80::1: an IPv6 link-local address needs an interface to be reached: give the bootstrap machine's address in the machine network"},
		{"--dir empty", with(func(o *Options) { o.Dir = "" }),
			`--dir "": a directory of its own for this run's files (default /run/vipctl-bootstrap), not the host's root`},
		{"--dir /", with(func(o *Options) { o.Dir = "//" }),
			`--dir "//": a directory of its own for this run's files (default /run/vipctl-bootstrap), not the host's root`},
		{"an --interface that is none", with(func(o *Options) { o.Interface = "eth0 up" }),
			`--interface "eth0 up": must be a network interface name: 1-15 of A-Z a-z 0-9 _ . -`},
		{"-f and --nodes empty", with(func(o *Options) { o.Config, o.Nodes = "", "" }),
			"--file: empty: the cluster file naming the bootstrap host (spec.bootstrap)\n--nodes: empty: the node list the MachineConfigs were rendered with"},
		{"every problem at once", with(func(o *Options) { o.YieldAfter, o.Grace, o.Servers = -time.Second, 0, fixture.Addrs("0.0.0.0", "::1") }),
			"--yield-after -1s: must be positive: how long the control-plane nodes must answer without a break before they get the VIP\n" +
				"--grace 0s: must be positive: how long the connections accepted here are served after the VIP left; without it they are reset\n" +
				"--bootstrap-address 0.0.0.0: the unspecified address names no host: give the bootstrap machine's address (or leave the flag out on the bootstrap machine itself)\n" +
				"--bootstrap-address ::1: a loopback address: haproxy would balance onto this host, and the control-plane nodes could not reach it either"},
	}
	for _, tc := range cases {
		if got := fixture.ErrText(tc.o.Validate()); got != tc.want {
			t.Errorf("%s:\n%s\nwant:\n%s", tc.name, got, tc.want)
		}
	}
}

// TestPrepareRefusesServers: a --bootstrap-address the cluster file says
// is no bootstrap machine, every one at once, before this host's
// interfaces are even looked at.
func TestPrepareRefusesServers(t *testing.T) {
	t.Parallel()
	day1, nodes := fixture.Repo("examples/day1-bootstrap.yaml"), fixture.Repo("examples/nodes/compact.yaml")
	cases := []struct {
		name    string
		servers []string
		want    string
	}{
		{"the API VIP", []string{"198.51.100.5"},
			"--bootstrap-address 198.51.100.5: is spec.api.vips[0] of " + day1 + ": haproxy would balance onto the VIP it serves; give the bootstrap machine's own address"},
		{"an ingress VIP", []string{"198.51.100.6"},
			"--bootstrap-address 198.51.100.6: is spec.ingress[0].vips[0] of " + day1 + ": haproxy would balance onto the VIP it serves; give the bootstrap machine's own address"},
		{"outside the machine networks", []string{"203.0.113.10"},
			"--bootstrap-address 203.0.113.10: outside spec.machineNetworks (198.51.100.0/24) of " + day1 + ": the bootstrap machine is a host of the machine network"},
		{"a second of one family, and a VIP", []string{"198.51.100.10", "198.51.100.5"},
			"--bootstrap-address 198.51.100.5: a second IPv4 address (one per family)\n" +
				"--bootstrap-address 198.51.100.5: is spec.api.vips[0] of " + day1 + ": haproxy would balance onto the VIP it serves; give the bootstrap machine's own address"},
	}
	for _, tc := range cases {
		_, err := prepare(Options{Config: day1, Nodes: nodes, Servers: fixture.Addrs(tc.servers...)})
		if got := fixture.ErrText(err); got != tc.want {
			t.Errorf("%s:\n%s\nwant:\n%s", tc.name, got, tc.want)
		}
	}
}

// TestRunStartsNothingOnBadOptions: Run refuses bad options before it
// reads a file, asks a node or creates its directory, so no daemon can
// have started.
func TestRunStartsNothingOnBadOptions(t *testing.T) {
	t.Parallel()
	for name, edit := range map[string]func(*Options){
		"--yield-after -1s":                 func(o *Options) { o.YieldAfter = -time.Second },
		"--bootstrap-address 0.0.0.0":       func(o *Options) { o.Servers = fixture.Addrs("0.0.0.0") },
		"--bootstrap-address the API VIP":   func(o *Options) { o.Servers = fixture.Addrs("198.51.100.5") },
		"--grace 0":                         func(o *Options) { o.Grace = 0 },
		"--bootstrap-address outside":       func(o *Options) { o.Servers = fixture.Addrs("203.0.113.10") },
		"--bootstrap-address loopback (v6)": func(o *Options) { o.Servers = fixture.Addrs("::1") },
	} {
		dir := filepath.Join(t.TempDir(), "run")
		o := Options{Config: fixture.Repo("examples/day1-bootstrap.yaml"), Nodes: fixture.Repo("examples/nodes/compact.yaml"), Dir: dir, YieldAfter: DefaultYieldAfter, Grace: time.Second}
		edit(&o)
		res, err := Run(t.Context(), o)
		if err == nil || res != nil || !strings.HasPrefix(err.Error(), "--") {
			t.Errorf("%s: result %v, error %v; want the flag's error", name, res, err)
		}
		if _, serr := os.Stat(dir); !os.IsNotExist(serr) {
			t.Errorf("%s: %s exists (%v): something was written before the options were refused", name, dir, serr)
		}
	}
}
