package render

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/keepalived"
	"github.com/vipctl/vipctl/test/fixture"
)

// TestHandoverMatchesKeepalivedConf: for every example and node, the
// handover data names exactly the instances of the node's keepalived.conf
// whose VIPs live on the VRRP interface,
// with their VRIDs, every address they hold (advertised, excluded and
// added by the sidecar) and,
// in unicast mode, the same peers.
func TestHandoverMatchesKeepalivedConf(t *testing.T) {
	for _, ex := range fixture.Examples(t) {
		r := renderExample(t, ex)
		for _, n := range r.nodes {
			h, err := r.plan.Handover(n.Name)
			if err != nil {
				t.Fatalf("%s %s: %v", ex, n.Name, err)
			}
			kv, err := r.plan.keepalivedView(n.Name)
			if err != nil {
				t.Fatal(err)
			}
			// Instances whose VIPs live on an interface of their own
			// have no handover (see Plan.Handover).
			kv.Instances = slices.DeleteFunc(kv.Instances, func(iv keepalived.Instance) bool { return iv.VIPInterface != "" })
			if len(kv.Instances) == 0 {
				// A node off every VRRP segment (bgp-two-racks' rack-b
				// workers only announce routes) has nothing to hand over.
				if len(h.Instances) != 0 {
					t.Errorf("%s %s: %d handover instances, none in keepalived.conf", ex, n.Name, len(h.Instances))
				}
				continue
			}
			if h.Interface != kv.Instances[0].Interface {
				t.Errorf("%s %s: interface %q, keepalived.conf says %q", ex, n.Name, h.Interface, kv.Instances[0].Interface)
			}
			if len(h.Instances) != len(kv.Instances) {
				t.Fatalf("%s %s: %d handover instances, %d in keepalived.conf", ex, n.Name, len(h.Instances), len(kv.Instances))
			}
			for i, iv := range kv.Instances {
				hi := h.Instances[i]
				var want []netip.Addr
				for _, v := range append(slices.Clone(iv.VIPs), iv.Excluded...) {
					want = append(want, netip.MustParseAddr(strings.SplitN(v, "/", 2)[0]))
				}
				// A sidecar-announced pool's Service addresses are the
				// sidecar's, not in keepalived.conf (TestSidecarAnnouncedPool).
				want = append(want, hi.Sidecar...)
				slices.SortFunc(want, netip.Addr.Compare)
				if hi.Priority != iv.Priority || hi.Priority < minPriority {
					t.Errorf("%s %s: instance %s: priority %d, keepalived.conf %d", ex, n.Name, iv.Name, hi.Priority, iv.Priority)
				}
				if hi.VRID != iv.VRID || fmt.Sprintf("IPv%d", hi.Family) != iv.Family || !slices.Equal(hi.VIPs, want) {
					t.Errorf("%s %s: instance %s: handover %d/IPv%d %v, keepalived.conf %d/%s %v", ex, n.Name, iv.Name, hi.VRID, hi.Family, hi.VIPs, iv.VRID, iv.Family, want)
				}
				for _, a := range n.Addresses {
					if slices.Contains(hi.Peers, a) {
						t.Errorf("%s %s: instance %s lists the node itself (%s) as a peer", ex, n.Name, iv.Name, a)
					}
				}
				if r.config.Spec.VRRP.Mode == v1alpha1.ModeUnicast {
					var peers []netip.Addr
					for _, p := range iv.Peers {
						peers = append(peers, netip.MustParseAddr(p))
					}
					slices.SortFunc(peers, netip.Addr.Compare)
					if !slices.Equal(hi.Peers, peers) {
						t.Errorf("%s %s: instance %s: peers %v, keepalived.conf %v", ex, n.Name, iv.Name, hi.Peers, peers)
					}
				} else if len(hi.Peers) == 0 {
					t.Errorf("%s %s: multicast instance %s has no peer to learn a drainer from", ex, n.Name, iv.Name)
				}
			}
		}
	}
	if _, err := renderExample(t, "compact-ipv4.yaml").plan.Handover("nobody"); err == nil {
		t.Error("Handover of an unknown node: no error")
	}
}
