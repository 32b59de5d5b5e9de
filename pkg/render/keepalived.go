package render

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vipctl/vipctl/pkg/keepalived"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/onnode"
)

// LocalServiceStatus is what node's status file of ls holds.
func LocalServiceStatus(ls cluster.LocalService, node string) int {
	switch {
	case slices.Contains(ls.Nodes, node):
		return onnode.LocalReady
	case slices.Contains(ls.Draining, node):
		return onnode.LocalDraining
	}
	return onnode.LocalNone
}

// Script and track-file names inside keepalived.conf, and what they watch.
const (
	haproxyScriptName = "chk_haproxy"
	drainTrackName    = "vipctl_drain"
	// drainWeight is only the file-level default; each instance overrides
	// it with its own weight (see drainRef).
	drainWeight      = -1
	routerReadyPath  = "/healthz/ready"
	haproxyReadyPath = "/readyz"
	minPriority      = 2
	priorityBuckets  = 240
	// preferredPriority marks the node a pool instance is steered to; it is
	// above every hashed priority (2..241).
	preferredPriority = 250
	// BootstrapPriority is the bootstrap host's priority in the API
	// instances: above every node's (241 at most), so that the
	// control-plane nodes wait for it to yield.
	BootstrapPriority = 254
	// excludedPriority is a drained node's priority (see DrainFile), given
	// for good to a node excluded from Service VIPs, and to a node held
	// back until its first sync.
	excludedPriority = 1
	scriptInterval   = 1
	scriptTimeout    = 1
)

// scriptSafe maps a DNS label to keepalived's identifier alphabet.
func scriptSafe(name string) string { return strings.ReplaceAll(name, "-", "_") }

func instanceName(key v1alpha1.InstanceKey, family int) string {
	return keyIdent(key) + "_v" + strconv.Itoa(family)
}

// keyIdent turns an instance key into a keepalived identifier that no other
// key shares. Mapping both "-" and "/" to "_" would make service/dev/a-web
// and service/dev-a/web one instance, which keepalived refuses as a
// duplicate: every node holding both would keep its old config for good.
// The config's own keys have one free component (a DNS label) after a
// fixed prefix, so the plain mapping is injective for them; a Service key
// has two, and the namespace's length in front of it makes the split point
// unambiguous (service_3_dev_a_web vs service_5_dev_a_web).
func keyIdent(key v1alpha1.InstanceKey) string {
	if ns, name, ok := key.Service(); ok {
		return fmt.Sprintf("service_%d_%s_%s", len(ns), scriptSafe(ns), scriptSafe(name))
	}
	return scriptSafe(strings.ReplaceAll(key.String(), "/", "_"))
}

// keepalivedView is one node's keepalived.conf and what the plan left
// out of it.
type keepalivedView struct {
	keepalived.Config
	// lonely are the instances left out for lack of a peer.
	lonely []string
}

// keepalivedView is the node's view of the plan. It refuses an instance
// with no peer to talk to in unicast mode: keepalived would make every
// node master of it at once.
func (p *Plan) keepalivedView(node string) (*keepalivedView, error) {
	n, ok := p.nodes[node]
	if !ok {
		return nil, p.notListed(node)
	}
	s := &p.c.Spec
	v := &keepalivedView{Config: keepalived.Config{Node: node, Cluster: p.c.Metadata.Name, RouterID: scriptSafe(node), ScriptUser: onnode.ScriptUser, Version: s.VRRP.Version,
		GARPDelay: int(onnode.GARPDelay / time.Second), GARPRepeat: onnode.GARPRepeat, GARPRefresh: int(onnode.GARPRefresh / time.Second)}}
	usedScripts, usedTracks := map[string]bool{}, map[string]bool{drainTrackName: true}
	// The instances' own step-down files, declared after the shared ones.
	var own []keepalived.TrackFile
	iface := n.Interface
	if iface == "" {
		iface = s.VRRP.Interface
	}
	for _, inst := range p.byNode[node] {
		iv := keepalived.Instance{
			Key: inst.key.String(), Name: instanceName(inst.key, inst.family), Family: "IPv" + strconv.Itoa(inst.family), Why: inst.why,
			Interface: iface, Version: s.VRRP.Version, VRID: inst.vrid, Advert: advert(s.VRRP.Advert()),
			TrackScripts: inst.scripts,
		}
		if inst.family == 6 {
			iv.Version = 3
		}
		self, peers := inst.membersOf(node)
		iv.Priority = self.priority
		iv.TrackFiles = append([]string{drainRef(self.priority)}, inst.files...)
		if stepsDown(inst, peers) {
			t := unheardTrack(iv.Name, p.root)
			iv.TrackFiles = append(iv.TrackFiles, fmt.Sprintf("%s weight %d", t.Name, -(self.priority-1)))
			own = append(own, t)
		}
		if s.VRRP.Mode == v1alpha1.ModeUnicast {
			iv.UnicastSrc = self.src.String()
			if !inst.routed {
				// A routed instance's peers are routers away.
				iv.PeerCheck = peerCheck(inst.family)
			}
			for _, a := range peers {
				iv.Peers = append(iv.Peers, a.String())
			}
		}
		if s.VRRP.Mode == v1alpha1.ModeUnicast && len(iv.Peers) == 0 {
			err := fmt.Errorf("node %s: VRRP instance %s (%s) has no unicast peer: it needs at least two eligible nodes with an address in %s", node, inst.key, iv.Family, inst.where())
			if !p.skipLonely {
				return nil, err
			}
			v.lonely = append(v.lonely, err.Error())
			continue
		}
		on := iface
		if inst.on.Own() {
			// add left out every node without it.
			iv.VIPInterface, _ = inst.on.On(n.Labels)
			on = iv.VIPInterface
			v.OwnInterfaces = true
		}
		for _, a := range inst.vips {
			iv.VIPs = append(iv.VIPs, vipAddress(a, on))
		}
		iv.Sidecar = inst.sidecar
		for _, a := range inst.excluded {
			if inst.sidecar {
				break
			}
			iv.Excluded = append(iv.Excluded, vipAddress(a, on))
		}
		for _, sc := range inst.scripts {
			usedScripts[sc] = true
		}
		for _, f := range inst.files {
			usedTracks[f] = true
		}
		v.Instances = append(v.Instances, iv)
	}
	for _, sc := range p.scripts {
		if usedScripts[sc.Name] {
			v.Scripts = append(v.Scripts, sc)
		}
	}
	for _, t := range p.tracks {
		if usedTracks[t.Name] {
			v.TrackFiles = append(v.TrackFiles, t)
		}
	}
	v.TrackFiles = append(v.TrackFiles, own...)
	return v, nil
}

// vipAddress is a VIP as keepalived.conf names it: a host address on the
// interface, marked the way OVN-Kubernetes recognises an address that is
// not the node's (see VIPLabel).
func vipAddress(a netip.Addr, iface string) string {
	if a.Is4() {
		return fmt.Sprintf("%s/32 dev %s label %s", a, iface, onnode.VIPLabel)
	}
	return fmt.Sprintf("%s/128 dev %s", a, iface)
}

// peerCheck drops IPv4 adverts that crossed a router (TTL below 255), so
// a peer's address forged from off the segment does not count. Every node
// sends with unicast_ttl 255. IPv6 is not checked yet: keepalived sends
// unicast IPv6 adverts with hop limit 64 unless told otherwise (measured,
// 2.2.7), so a node still on an older vipctl during a rolling upgrade
// would be ignored and both would hold the VIP. Once every node sends 255,
// IPv6 can be checked too.
func peerCheck(family int) string {
	if family == 4 {
		return " min_ttl 255"
	}
	return ""
}

// stepsDown says whether the node's instance gets an UnheardFile: it has
// a peer to hand its VIPs to, its VIPs live on the VRRP interface, where
// the wire is asked (Handover; not for a routed instance, whose members
// share no segment), and it is no externalTrafficPolicy Local
// Service's instance, whose address follows the Service's endpoints (one
// instance per Service: thousands of files) and is only reported.
func stepsDown(inst *instance, peers []netip.Addr) bool {
	_, _, service := inst.key.Service()
	return len(peers) > 0 && !service && !inst.on.Own() && !inst.routed
}

// unheardTrack declares an instance's UnheardFile to keepalived.
func unheardTrack(instance, root string) keepalived.TrackFile {
	return keepalived.TrackFile{Name: "vipctl_unheard_" + instance, Path: root + onnode.UnheardFile(instance), Weight: drainWeight,
		Why: "1 while the other members hear nobody answer for " + instance + "'s VIPs (written by the sidecar)"}
}

// drainRef tracks the drain file with a weight that takes this instance's
// priority to exactly 1. keepalived does not clamp: a weight that takes the
// priority to 0 or below puts the instance in FAULT, which drops the VIP at
// once and resigns (break-before-make, measured: a 500 ms gap).
func drainRef(priority int) string {
	return fmt.Sprintf("%s weight %d", drainTrackName, -(priority - 1))
}

// advert formats an interval the way keepalived reads it: seconds, with
// centiseconds when needed.
func advert(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64)
}
