package e2e

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/vipctl/vipctl/test/lab"
	"github.com/vipctl/vipctl/test/netlab"
)

// Two pools on two L2 segments of their own, neither the machine
// network: dmz on br-dmz (the same name on every node), prt on the
// interface the node label vipctl.io/prt-if names (IPv4 and IPv6).
const ownInterfacePools = `  servicePools:
    - name: dmz
      interface: br-dmz
      addresses: [203.0.113.10-203.0.113.40]
      nodeSelector: {pool: web}
      instances: 1
    - name: prt
      interfaceLabel: vipctl.io/prt-if
      addresses: [203.0.113.140-203.0.113.170, "2001:db8:300::10-2001:db8:300::40"]
      nodeSelector: {pool: web}
      instances: 1
`

// TestPoolsOnTheirOwnSegments: with the real keepalived, sidecars and
// allocator against the real apiserver, the Service VIPs of two pools
// live on two segments the machine network does not reach, and clients
// there (IPv4 and IPv6) reach them. Each pool fails over on its own: the
// holder's link on one segment going down moves that pool's VIP and no
// other (the other segment's client sees no failed request). A pool node
// without the pool's interface holds none of its VIPs, says so with an
// Event and a metric, and still serves the other pool.
func TestPoolsOnTheirOwnSegments(t *testing.T) {
	specs := append(sidecarSpecs(), lab.NodeSpec{Name: "worker-2", Addr: "198.51.100.23/24", Labels: map[string]string{"pool": "web"}})
	for i := range specs {
		if specs[i].Labels["pool"] == "web" {
			specs[i].Labels["vipctl.io/prt-if"] = "eth-prt"
			// VRRP for prt's IPv6 VIPs speaks in the IPv6 machine network.
			specs[i].Addr6 = "2001:db8:100::" + strings.TrimSuffix(strings.TrimPrefix(specs[i].Addr, "198.51.100."), "/24") + "/64"
		}
	}
	kc := lab.StartKube(t, clusterYAML("fast", "unicast", ownInterfacePools), specs)
	// The VLANs: worker-0 and worker-1 on both, worker-2 on prt only.
	for i, w := range []string{"worker-0", "worker-1", "worker-2"} {
		n := kc.ByName[w]
		if w != "worker-2" {
			kc.AddLink(n, "dmz", "br-dmz", "203.0.113."+strconv.Itoa(51+i)+"/25")
		}
		kc.AddLink(n, "prt", "eth-prt", "203.0.113."+strconv.Itoa(181+i)+"/25", "2001:db8:300::"+strconv.Itoa(181+i)+"/64")
	}
	dmzClient := kc.AddHost("dmz-client", netlab.HostOpts{Iface: "eth0", Segment: "dmz", Addrs: []string{"203.0.113.100/25"}})
	prtClient := kc.AddHost("prt-client", netlab.HostOpts{Iface: "eth0", Segment: "prt", Addrs: []string{"203.0.113.200/25", "2001:db8:300::200/64"}})
	kc.Deploy(t)
	for _, n := range kc.Nodes {
		kc.AddNode(t, n.Name)
		kc.StartSidecar(t, n.Name)
		n.StartEcho(t, "[::]:8080")
	}
	const dmzVIP, prtVIP, prtVIP6 = "203.0.113.10", "203.0.113.140", "2001:db8:300::10"
	kc.CreateLBService(t, "dmz", dmzVIP)
	kc.CreateLBService(t, "prt", prtVIP+","+prtVIP6)
	for _, vip := range []string{dmzVIP, prtVIP, prtVIP6} {
		kc.WaitConf(t, "worker-0", vip, func(c string) bool { return strings.Contains(c, vip+"/") })
	}

	// worker-2 lacks br-dmz: left out of dmz, reported, still in prt.
	kc.WaitConf(t, "worker-2", "prt but not dmz", func(c string) bool {
		return strings.Contains(c, prtVIP+"/32 dev eth-prt") && !strings.Contains(c, "pool_dmz")
	})
	sel := fields.Set{"involvedObject.name": "worker-2", "involvedObject.kind": "Node", "reason": "VIPInterfaceMissing"}.AsSelector().String()
	lab.WaitFor(t, 30*time.Second, "Event VIPInterfaceMissing on worker-2", func() bool {
		evs, err := kc.Admin.CoreV1().Events(metav1.NamespaceDefault).List(context.Background(), metav1.ListOptions{FieldSelector: sel})
		return err == nil && len(evs.Items) > 0 && evs.Items[0].Type == corev1.EventTypeWarning &&
			strings.Contains(evs.Items[0].Message, "service pool dmz: node worker-2 holds none of its VIPs: it has no interface br-dmz")
	})
	if got := testutil.ToFloat64(kc.Sidecars["worker-2"].Metrics.InterfaceMissing.WithLabelValues("service pool dmz")); got != 1 {
		t.Errorf("worker-2 vip_interface_missing{owner=service pool dmz} = %v, want 1", got)
	}
	if got := testutil.ToFloat64(kc.Sidecars["worker-0"].Metrics.InterfaceMissing.WithLabelValues("service pool dmz")); got != 0 {
		t.Errorf("worker-0 vip_interface_missing{owner=service pool dmz} = %v, want 0", got)
	}
	// And the rendered alert, in a real Prometheus, names the node.
	w := watchAlerts(t, kc.Config, sidecarTargets(kc)...)
	w.expect("worker-2 lacks br-dmz", "VipctlVIPInterfaceMissing node=worker-2")

	dmzHolder := kc.Settled(dmzVIP)
	prtHolder := kc.Settled(prtVIP)
	if dmzHolder == "worker-2" {
		t.Fatalf("%s held by worker-2, which has no br-dmz", dmzVIP)
	}
	// The VIPs live on their own interfaces, not on br-ex.
	if out := kc.ByName[dmzHolder].Host.MustExec("ip", "-o", "addr", "show", "dev", "br-dmz"); !strings.Contains(string(out), dmzVIP+"/32") {
		t.Errorf("%s: %s not on br-dmz: %s", dmzHolder, dmzVIP, out)
	}
	dmzPoll := lab.PollFrom(dmzClient, "http://"+dmzVIP+":8080/", 10*time.Millisecond)
	prtPoll := lab.PollFrom(prtClient, "http://"+prtVIP+":8080/", 10*time.Millisecond)
	prtPoll6 := lab.PollFrom(prtClient, "http://["+prtVIP6+"]:8080/", 10*time.Millisecond)
	for what, p := range map[string]*lab.Poller{"dmz": dmzPoll, "prt": prtPoll, "prt IPv6": prtPoll6} {
		lab.WaitFor(t, 20*time.Second, what+" VIP answers its segment's client", func() bool { ok, _ := p.Counts(); return ok > 20 })
	}

	// dmz's link on its holder goes down: dmz moves, prt does not notice.
	_, prtFail0 := prtPoll.Counts()
	_, prtFail60 := prtPoll6.Counts()
	kc.ByName[dmzHolder].Host.MustExec("ip", "link", "set", "br-dmz", "down")
	next := kc.WaitNewHolder(dmzVIP, dmzHolder, 10*time.Second)
	if next == "worker-2" {
		t.Errorf("%s moved to worker-2, which has no br-dmz", dmzVIP)
	}
	ok0, _ := dmzPoll.Counts()
	lab.WaitFor(t, 10*time.Second, "dmz answers again from "+next, func() bool { ok, _ := dmzPoll.Counts(); return ok > ok0+20 })
	if h := kc.Holders(prtVIP); len(h) != 1 || h[0] != prtHolder {
		t.Errorf("%s held by %v after dmz's failover, want %s alone", prtVIP, h, prtHolder)
	}
	if _, f := prtPoll.Counts(); f != prtFail0 {
		t.Errorf("prt's client saw %d failed requests during dmz's failover", f-prtFail0)
	}
	if _, f := prtPoll6.Counts(); f != prtFail60 {
		t.Errorf("prt's IPv6 client saw %d failed requests during dmz's failover", f-prtFail60)
	}
	kc.ByName[dmzHolder].Host.MustExec("ip", "link", "set", "br-dmz", "up")
	dmzHolder = kc.Settled(dmzVIP)

	// prt's link on its holder goes down: prt (both families) moves, dmz
	// does not notice.
	_, dmzFail0 := dmzPoll.Counts()
	kc.ByName[prtHolder].Host.MustExec("ip", "link", "set", "eth-prt", "down")
	for _, vip := range []string{prtVIP, prtVIP6} {
		kc.WaitNewHolder(vip, prtHolder, 10*time.Second)
	}
	for what, p := range map[string]*lab.Poller{"prt": prtPoll, "prt IPv6": prtPoll6} {
		ok0, _ := p.Counts()
		lab.WaitFor(t, 10*time.Second, what+" answers again", func() bool { ok, _ := p.Counts(); return ok > ok0+20 })
	}
	if h := kc.Holders(dmzVIP); len(h) != 1 || h[0] != dmzHolder {
		t.Errorf("%s held by %v after prt's failover, want %s alone", dmzVIP, h, dmzHolder)
	}
	if _, f := dmzPoll.Counts(); f != dmzFail0 {
		t.Errorf("dmz's client saw %d failed requests during prt's failover", f-dmzFail0)
	}
	for _, p := range []*lab.Poller{dmzPoll, prtPoll, prtPoll6} {
		p.Stop()
	}
	// The machine network never carried them.
	for _, n := range kc.Nodes {
		out := n.Host.MustExec("ip", "-o", "addr", "show", "dev", "br-ex")
		for _, vip := range []string{dmzVIP, prtVIP, prtVIP6} {
			if strings.Contains(string(out), " "+vip+"/") {
				t.Errorf("%s has %s on br-ex", n.Name, vip)
			}
		}
	}
}
