package vrid

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vipctl/test/netlab"
)

// advertiserConf is a real keepalived advertising three known VRIDs from
// node a: 77 unicast VRRPv3 to b, 78 multicast VRRPv2, 79 over IPv6.
const advertiserConf = `vrrp_instance unicast {
    state MASTER
    interface br-ex
    version 3
    virtual_router_id 77
    priority 200
    advert_int 0.2
    unicast_src_ip 198.51.100.11
    unicast_peer {
        198.51.100.12
    }
    virtual_ipaddress {
        198.51.100.50/32 dev br-ex
    }
}
vrrp_instance multicast {
    state MASTER
    interface br-ex
    version 2
    virtual_router_id 78
    priority 150
    advert_int 1
    virtual_ipaddress {
        198.51.100.51/32 dev br-ex
    }
}
vrrp_instance six {
    state MASTER
    interface br-ex
    version 3
    virtual_router_id 79
    priority 100
    advert_int 0.2
    virtual_ipaddress {
        2001:db8:100::50/128 dev br-ex
    }
}
`

// startAdvertiser starts keepalived on a new node a and waits until it
// holds all three VIPs, i.e. every instance is master and advertising.
func startAdvertiser(t *testing.T, lab *netlab.Lab) *netlab.Proc {
	t.Helper()
	a := lab.AddHost("a", netlab.HostOpts{Addrs: []string{"198.51.100.11/24", "2001:db8:100::11/64"}})
	dir := t.TempDir()
	conf := filepath.Join(dir, "keepalived.conf")
	if err := os.WriteFile(conf, []byte(advertiserConf), 0o644); err != nil {
		t.Fatal(err)
	}
	p := a.Start("keepalived", "keepalived", "-n", "-l", "-D", "-G", "-f", conf,
		"-p", filepath.Join(dir, "k.pid"), "-r", filepath.Join(dir, "v.pid"), "-c", filepath.Join(dir, "c.pid"))
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, _ := a.Exec("ip", "addr", "show", "dev", "br-ex")
		if strings.Contains(string(out), "198.51.100.50/32") && strings.Contains(string(out), "198.51.100.51/32") && strings.Contains(string(out), "2001:db8:100::50/128") {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("keepalived never took all VIPs:\n%s\nlog:\n%s", out, p.LogTail(30))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestListenSeesRealKeepalived captures a real keepalived's adverts: node
// c sees the multicast ones (IPv4 and IPv6), node b the unicast one sent
// to it.
func TestListenSeesRealKeepalived(t *testing.T) {
	lab := netlab.New(t)
	b := lab.AddHost("b", netlab.HostOpts{Addrs: []string{"198.51.100.12/24", "2001:db8:100::12/64"}})
	c := lab.AddHost("c", netlab.HostOpts{Addrs: []string{"198.51.100.13/24", "2001:db8:100::13/64"}})
	keepalived := startAdvertiser(t, lab)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("keepalived log:\n%s", keepalived.LogTail(40))
		}
	})

	listen := func(h *netlab.Host) map[string]Observation {
		t.Helper()
		var capture *Capture
		if err := h.Do(func() (err error) {
			capture, err = Listen(context.Background(), "br-ex", 2500*time.Millisecond)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		// Every router once, every advert counted: 2.5 s of 0.2 s
		// adverts alone is more than ten.
		if capture.Adverts < 10 || capture.Adverts < len(capture.Routers) {
			t.Errorf("%s: %d adverts counted from %d routers", h.Name, capture.Adverts, len(capture.Routers))
		}
		byKey := map[string]Observation{}
		for _, o := range capture.Routers {
			byKey[fmt.Sprintf("%d/%s", o.ID, o.Family)] = o
		}
		return byKey
	}
	atC := listen(c)
	if o, ok := atC["78/ipv4"]; !ok || o.Version != 2 || o.Source.String() != "198.51.100.11" || o.Destination.String() != "224.0.0.18" || o.Priority != 150 {
		t.Errorf("c: multicast VRRPv2 78 = %+v (seen: %v)", o, atC)
	}
	if o, ok := atC["79/ipv6"]; !ok || o.Version != 3 || o.Destination.String() != "ff02::12" || o.AdvertCentis != 20 {
		t.Errorf("c: IPv6 VRRPv3 79 = %+v (seen: %v)", o, atC)
	}
	atB := listen(b)
	if o, ok := atB["77/ipv4"]; !ok || o.Version != 3 || o.Source.String() != "198.51.100.11" || o.Destination.String() != "198.51.100.12" || o.AdvertCentis != 20 {
		t.Errorf("b: unicast VRRPv3 77 = %+v (seen: %v)", o, atB)
	}
}

func TestListenErrors(t *testing.T) {
	t.Parallel()
	if _, err := Listen(context.Background(), "no-such-if0", time.Second); !errors.Is(err, ErrNoInterface) {
		t.Errorf("unknown interface: %v, want ErrNoInterface", err)
	}
}

// TestVRIDsCommandListens runs the real vipctl binary inside node c: the
// cluster pins its API ID to 78, which keepalived on node a advertises, so
// the command must report the live clash and exit 2.
func TestVRIDsCommandListens(t *testing.T) {
	dir := t.TempDir()
	bin := buildVipctl(t, dir)
	cluster := probeCluster(t, dir, "  vrrp:\n    virtualRouterIDs: {api: 78}\n")
	lab := netlab.New(t)
	c := lab.AddHost("c", netlab.HostOpts{Addrs: []string{"198.51.100.13/24"}})
	startAdvertiser(t, lab)
	out, err := c.Exec(bin, "vr-ids", "-f", cluster, "--listen", "br-ex", "--for", "2500ms")
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Fatalf("exit: %v, want status 2\n%s", err, out)
	}
	if !regexp.MustCompile(`(?m)^listened on br-ex for 2\.5s: [1-9][0-9]* VRRP advertisement\(s\), VRRP IDs in use there: (.*, )?78(, .*)?$`).Match(out) {
		t.Errorf("no summary of what was heard:\n%s", out)
	}
	for _, want := range []string{
		"APIVirtualRouterID: 78\n",
		"live: VirtualRouterID 78 from 198.51.100.11 on br-ex (VRRPv2)\n",
		"clash: APIVirtualRouterID 78 also seen live on br-ex from 198.51.100.11 (VRRPv2)\n",
		"virtualRouterIDs:\n  api: ",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// probeCluster writes the cluster file "probe" on 198.51.100.0/24 into
// dir, with extra lines at the end of its spec, and returns its path.
func probeCluster(t *testing.T, dir, extra string) string {
	t.Helper()
	path := filepath.Join(dir, "cluster.yaml")
	if err := os.WriteFile(path, []byte(`apiVersion: vipctl.io/v1alpha1
kind: ClusterVIPs
metadata: {name: probe}
spec:
  baseDomain: example.test
  machineNetworks: [198.51.100.0/24]
  api: {vips: [198.51.100.5]}
`+extra), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// buildVipctl builds the vipctl binary into dir, for commands run inside a
// lab host.
func buildVipctl(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "vipctl")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/vipctl/vipctl/cmd/vipctl").CombinedOutput(); err != nil {
		t.Fatalf("building vipctl: %v\n%s", err, out)
	}
	return bin
}

// TestVRIDsListenBeforeInstall: on a host of the machine network before
// installing, br-ex does not exist yet (OVN-Kubernetes makes it). `vr-ids
// --listen br-ex` there used to fail with "no such network interface";
// it now names the NIC to use, the one with an address in the machine
// network. Listening on that NIC says what was checked, also when
// nothing was heard and when nothing clashes: how long, how many adverts,
// which IDs.
func TestVRIDsListenBeforeInstall(t *testing.T) {
	dir := t.TempDir()
	bin := buildVipctl(t, dir)
	cluster := probeCluster(t, dir, "")
	lab := netlab.New(t)
	host := lab.AddHost("c", netlab.HostOpts{Iface: "ens3", Addrs: []string{"198.51.100.13/24"}})
	vipctl := func(args ...string) (int, string) {
		t.Helper()
		out, err := host.Exec(append([]string{bin}, args...)...)
		var exit *exec.ExitError
		switch {
		case err == nil:
			return 0, string(out)
		case errors.As(err, &exit):
			return exit.ExitCode(), string(out)
		}
		t.Fatal(err)
		return 0, ""
	}

	code, out := vipctl("vr-ids", "-f", cluster, "--listen", "br-ex", "--for", "1s")
	const want = "error: --listen br-ex: this host has no interface br-ex; br-ex is the bridge OVN-Kubernetes builds on each node during installation, out of the NIC that carries the node's address in the machine network: before installing, listen on that NIC; here that is ens3 (198.51.100.13/24), with an address in the machine network\n"
	if code != 1 || out != want {
		t.Errorf("--listen br-ex before installing: exit %d\n%s\nwant exit 1 and\n%s", code, out, want)
	}
	code, out = vipctl("vr-ids", "probe", "--listen", "br-ex", "--for", "1s")
	if code != 1 || !strings.HasSuffix(out, "; this host's interfaces with an address: ens3 (198.51.100.13/24) (with -f cluster.yaml, the ones in the machine network are named)\n") {
		t.Errorf("--listen br-ex without -f: exit %d\n%s", code, out)
	}
	code, out = vipctl("vr-ids", "-f", cluster, "--listen", "ens9", "--for", "1s")
	if code != 1 || !strings.HasPrefix(out, "error: --listen ens9: this host has no interface ens9; here that is ens3 (198.51.100.13/24)") {
		t.Errorf("--listen of a missing NIC: exit %d\n%s", code, out)
	}

	// Nothing on the segment yet: said so.
	code, out = vipctl("vr-ids", "-f", cluster, "--listen", "ens3", "--for", "1s")
	if code != 0 || !strings.HasSuffix(out, "listened on ens3 for 1s: 0 VRRP advertisement(s), no VRRP ID in use there\nno ID of this cluster heard on ens3\n") {
		t.Errorf("listening on a quiet segment: exit %d\n%s", code, out)
	}
	// Another cluster's keepalived advertising IDs this one does not use.
	startAdvertiser(t, lab)
	code, out = vipctl("vr-ids", "-f", cluster, "--listen", "ens3", "--for", "2500ms")
	if code != 0 || !regexp.MustCompile(`(?m)^listened on ens3 for 2\.5s: [1-9][0-9]* VRRP advertisement\(s\), VRRP IDs in use there: (.*, )?78, 79\n(live: .*\n)+no ID of this cluster heard on ens3\n$`).MatchString(out) {
		t.Errorf("listening next to another cluster: exit %d\n%s", code, out)
	}
}

// TestTapHearsWhatArrives: the sidecar's tap (no promiscuous mode, this
// host's own adverts dropped by the kernel) on a real keepalived's
// segment. On node c it hears the multicast adverts with the VIPs they
// carry, and not the unicast ones a sends to b; on node a, which
// sends them all, it hears nothing, unless asked for outgoing adverts.
func TestTapHearsWhatArrives(t *testing.T) {
	lab := netlab.New(t)
	lab.AddHost("b", netlab.HostOpts{Addrs: []string{"198.51.100.12/24"}})
	c := lab.AddHost("c", netlab.HostOpts{Addrs: []string{"198.51.100.13/24", "2001:db8:100::13/64"}})
	startAdvertiser(t, lab)
	a := lab.Host("a")
	// hear opens a tap inside h and reads it, outside, for 2.5 s: more
	// than two adverts of the slowest instance (1 s).
	hear := func(h *netlab.Host, o TapOptions) map[string]Advert {
		t.Helper()
		var tap *Tap
		if err := h.Do(func() (err error) { tap, err = OpenTap("br-ex", o); return err }); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tap.Close() }()
		heard := map[string]Advert{}
		if err := tap.Read(context.Background(), time.Now().Add(2500*time.Millisecond), func(ad Advert) {
			heard[fmt.Sprintf("%d/%s", ad.ID, ad.Family)] = ad
		}); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("%s: reading the tap: %v", h.Name, err)
		}
		return heard
	}
	atC := hear(c, TapOptions{})
	if ad, ok := atC["78/ipv4"]; !ok || ad.Source.String() != "198.51.100.11" || fmt.Sprint(ad.Addresses) != "[198.51.100.51]" {
		t.Errorf("c: multicast VRRPv2 78 = %+v (heard: %v)", ad, atC)
	}
	if ad, ok := atC["79/ipv6"]; !ok || !ad.Source.IsLinkLocalUnicast() || fmt.Sprint(ad.Addresses) != "[2001:db8:100::50]" {
		t.Errorf("c: multicast VRRPv3 79 over IPv6 = %+v (heard: %v)", ad, atC)
	}
	if ad, ok := atC["77/ipv4"]; ok {
		t.Errorf("c heard the unicast adverts to b without promiscuous mode: %+v", ad)
	}
	if atA := hear(a, TapOptions{}); len(atA) != 0 {
		t.Errorf("a heard its own adverts: %v", atA)
	}
	if atA := hear(a, TapOptions{Outgoing: true}); len(atA) != 3 {
		t.Errorf("a, asking for outgoing adverts, heard %v; want 77, 78 and 79", atA)
	}
}

// TestTapBatches: a tap with Batch hears every advert a tap without it
// hears, but wakes once per Batch, not once per advert: node c hears
// six adverts a second (78 every second, 79 five times a second).
func TestTapBatches(t *testing.T) {
	lab := netlab.New(t)
	c := lab.AddHost("c", netlab.HostOpts{Addrs: []string{"198.51.100.13/24", "2001:db8:100::13/64"}})
	startAdvertiser(t, lab)
	read := func(o TapOptions) (adverts, wakes int) {
		t.Helper()
		var tap *Tap
		if err := c.Do(func() (err error) { tap, err = OpenTap("br-ex", o); return err }); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tap.Close() }()
		if err := tap.Read(context.Background(), time.Now().Add(3500*time.Millisecond), func(Advert) { adverts++ }); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("reading the tap (%+v): %v", o, err)
		}
		return adverts, tap.wakes
	}
	each, eachWakes := read(TapOptions{})
	batched, batchedWakes := read(TapOptions{Batch: time.Second})
	t.Logf("without Batch: %d adverts, %d wakes; Batch 1s: %d adverts, %d wakes", each, eachWakes, batched, batchedWakes)
	if each < 15 || eachWakes < each/2 {
		t.Fatalf("without Batch: %d adverts in 3.5 s, %d wakes; want about 21, a wake each", each, eachWakes)
	}
	if batched < each*2/3 {
		t.Errorf("Batch 1s heard %d adverts, without it %d", batched, each)
	}
	if batchedWakes > 4 {
		t.Errorf("Batch 1s woke %d times in 3.5 s, want at most 4", batchedWakes)
	}
}
