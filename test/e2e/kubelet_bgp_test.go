package e2e

import (
	"context"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/render"
	"github.com/vipctl/vipctl/test/kubeletlab"
	"github.com/vipctl/vipctl/test/lab"
	"github.com/vipctl/vipctl/test/netlab"
)

// kubeletTorIP is the top-of-rack router every kubelet-lab node peers
// with when the cluster has spec.bgp.
const kubeletTorIP = "198.51.100.1"

// kubeletBGPYAML is the kubelet lab's cluster with a bgp pool beside the
// vrrp one, and the router (the lab's "tor", real FRR) as every node's
// peer. Timers 1s/3s keep the lab quick.
func kubeletBGPYAML(image string) string {
	return strings.Replace(kubeletClusterYAML(image, v1alpha1.ProfileFast), "  vrrp:\n", `    - name: racks
      mode: bgp
      addresses: [203.0.113.192/28]
      autoAssign: false
  bgp:
    asn: 64513
    peers:
      - address: `+kubeletTorIP+`
        asn: 64512
        holdTime: 3s
        keepaliveTime: 1s
  vrrp:
`, 1)
}

// TestBGPKubeletStaticPods: with spec.bgp the keepalived static pod that
// the real kubelet runs, in vipctl's image, carries FRR (the frr
// container: `vipctl frr`). A Service of the bgp pool gets an address; every
// node's sidecar renders frr.conf, FRR judges it and frr-reload.py applies
// it through the vty sockets the pod's containers share; the router (real
// FRR) installs the route with all three nodes as next hops, `vipctl
// status` shows every node's session Established (read by the sidecars
// through the same sockets), and a client routed through the router
// reaches the address. The frr container killed, the
// kubelet restarts it and the node announces again from the frr.conf on
// disk. The Service deleted, every node withdraws the route.
func TestBGPKubeletStaticPods(t *testing.T) {
	kc := startKubeletClusterFrom(t, kubeletBGPYAML)
	tor := kc.lab.AddHost("tor", netlab.HostOpts{Addrs: []string{kubeletTorIP + "/24"}})
	tor.MustExec("sysctl", "-qw", "net.ipv4.ip_forward=1")
	dir := lab.SharedDir(t, "vipctl-kubelet-tor-")
	lab.WriteFRRConf(t, dir, upstreamFRR...)
	router := lab.StartFRR(t, tor, dir)
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := router.Vtysh("show bgp summary")
			t.Logf("--- tor show bgp summary:\n%s", out)
		}
	})
	kc.waitPodsReady(t, 180*time.Second)

	vip := kc.serviceVIPFrom(t, "routed", "racks")
	var all []string
	for _, n := range kc.nodes {
		all = append(all, kubeletNodeIPs[n.Name])
		// kube-proxy's part on a real node: the address is local.
		n.Host.MustExec("ip", "addr", "add", vip+"/32", "dev", "lo")
	}
	slices.Sort(all)
	waitTorRoute := func(what string, want []string) {
		t.Helper()
		lab.WaitFor(t, 60*time.Second, what, func() bool { return slices.Equal(routeHops(tor, vip), want) })
	}
	waitTorRoute("the router's route to "+vip+" through every node", all)
	// The sidecars read their bgpd's sessions through the sockets the
	// frr container shares (group frrvty, no CAP_DAC_OVERRIDE), and
	// `vipctl status` shows every node's session Established.
	lab.WaitFor(t, 60*time.Second, "vipctl status: every node's session Established", func() bool {
		out, err := kc.status(t)
		if err != nil {
			return false
		}
		for _, n := range kc.nodes {
			if !regexp.MustCompile(`(?m)^` + n.Name + ` +` + regexp.QuoteMeta(kubeletTorIP) + ` +64512 +Established `).MatchString(out) {
				return false
			}
		}
		return true
	})
	kc.client.MustExec("ip", "route", "add", vip+"/32", "via", kubeletTorIP)
	url := "http://" + net.JoinHostPort(vip, strconv.Itoa(kubeletEchoPort)) + "/"
	lab.WaitFor(t, 30*time.Second, vip+" answering through the router", func() bool { _, err := kc.get(url); return err == nil })

	victim := kc.nodes[0]
	p, err := victim.Pod(context.Background(), render.KeepalivedPodName)
	if err != nil {
		t.Fatal(err)
	}
	id := kubeletlab.ContainerID(p, "frr")
	if id == "" {
		t.Fatalf("%s: no running frr container", victim.Name)
	}
	if err := victim.KillContainer(id); err != nil {
		t.Fatal(err)
	}
	lab.WaitFor(t, 120*time.Second, victim.Name+" frr restarted", func() bool {
		p, err := victim.Pod(context.Background(), render.KeepalivedPodName)
		if err != nil {
			return false
		}
		nid := kubeletlab.ContainerID(p, "frr")
		return nid != "" && nid != id
	})
	waitTorRoute("the route through every node again after "+victim.Name+"'s frr restart", all)

	if err := kc.admin.CoreV1().Services("default").Delete(context.Background(), "routed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitTorRoute("the route withdrawn after the Service went", nil)
}
