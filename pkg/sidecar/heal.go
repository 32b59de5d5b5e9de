package sidecar

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/dataplane"
	"github.com/vipctl/vipctl/pkg/onnode"
)

// Healing a holder nobody hears (issue 54 §2, docs/runtimecfg.md
// "Healing"). Each member of an instance asks the wire who answers for
// its VIPs and publishes on its Node what is not one answer (wire.go).
// When every other member of an instance this node holds says nobody
// answers for one of its VIPs, the holder announces the instance's VIPs
// again (gratuitous ARP, unsolicited neighbour advertisements): a switch
// or router that lost them learns them anew. Should the others still hear
// nobody once they have asked again, the holder steps down: it writes 1
// to the instance's onnode.UnheardFile, keepalived lowers its priority
// there to 1 as a drain does, and a member that is heard takes the VIPs
// over. It stays down for healHold, then writes 0 and is eligible again.
//
// Nothing is done about an address a stranger answers for (the others
// then hear an answer, not none): vipctl never fights a host outside the
// cluster for an address; it reports it (VipctlVIPAnsweredByStranger).

const (
	// healHold is how long a stepped-down instance stays down before the
	// node may hold it again: long enough that a fault that lasts (a
	// port's ARP replies filtered) does not move the VIP back and forth
	// every few seconds, short enough that the node serves again soon
	// after a passing one.
	healHold = 10 * time.Minute
)

// The Node Events' reasons: the VIPs announced again, the step-down.
const (
	ReasonVIPReannounced = "VIPReannounced"
	ReasonVIPSteppedDown = "VIPSteppedDown"
)

// healState is what the healing remembers between wire passes; only
// wireLoop touches it.
type healState struct {
	// reannounced are the instances whose VIPs were announced again
	// because nobody was heard, and when.
	reannounced map[string]time.Time
	// down are the instances stepped down, and when.
	down map[string]time.Time
}

// stepDownAfter is how long after announcing an instance's VIPs again the
// holder waits for the other members to hear it: each asks again after
// its rest and a pass (the node's own pass is the measure of theirs), and
// publishes the change; twice that, and a margin.
func (s *Sidecar) stepDownAfter(pass time.Duration) time.Duration {
	return 2*(s.o.WireInterval+pass) + 5*time.Second
}

// heal acts on what the other members published about the VIPs this node
// holds (local: its addresses as its own wire pass began), after each of
// the node's passes (pass is how long it took).
func (s *Sidecar) heal(tg wireTargets, local map[netip.Addr]bool, now time.Time, pass time.Duration) {
	h := &s.healing
	if h.reannounced == nil {
		h.reannounced, h.down = map[string]time.Time{}, map[string]time.Time{}
	}
	unheard := s.unheard(tg, local, now)
	for _, inst := range slices.Sorted(maps.Keys(unheard)) {
		addrs := unheard[inst]
		if _, down := h.down[inst]; down {
			continue
		}
		at, again := h.reannounced[inst]
		switch {
		case !again:
			h.reannounced[inst] = now
			s.reannounce(tg.iface, inst, addrs)
		case now.Sub(at) >= s.stepDownAfter(pass):
			delete(h.reannounced, inst)
			if s.stepDown(inst, addrs, now.Sub(at)) {
				h.down[inst] = now
			}
		}
	}
	// Heard again: the announcement is forgotten once its wait is over.
	// Heard for a moment within it (a member that asked while the
	// announcement's own gratuitous ARPs went out), it is not: unheard
	// again, the wait goes on from the announcement instead of starting
	// over with another one (a CI run announced three times and stepped
	// down after 32 s instead of 17).
	for inst, at := range h.reannounced {
		if _, still := unheard[inst]; !still && now.Sub(at) >= s.stepDownAfter(pass) {
			s.log.Info("the other members hear this node answer for the instance's VIPs again", "instance", inst)
			delete(h.reannounced, inst)
		}
	}
	for inst, at := range h.down {
		if now.Sub(at) < healHold {
			continue
		}
		if err := s.o.WriteFlag(onnode.UnheardFile(inst), false); err != nil {
			s.m.Failures.WithLabelValues("heal").Inc()
			s.log.Error("cannot end a step-down", "instance", inst, "err", err)
			continue
		}
		delete(h.down, inst)
		s.m.Heal.WithLabelValues("step-down-ended").Inc()
		s.log.Info("step-down ended: the node may hold the instance's VIPs again", "instance", inst, "after", healHold)
	}
}

// unheard maps each instance that can step down and whose VIPs this node
// holds to those of its VIPs every other member says nobody answers for:
// a fresh view with no answer on each of the other members' Nodes. A
// member that publishes nothing for the VIP heard one answer, or does not
// ask (an older release, --wire-interval 0): either spares the holder.
func (s *Sidecar) unheard(tg wireTargets, local map[netip.Addr]bool, now time.Time) map[string][]netip.Addr {
	if len(tg.instances) == 0 || s.nodes == nil {
		return nil
	}
	objs, err := s.nodes.List(labels.Everything())
	if err != nil {
		return nil
	}
	// silent: each other member's addresses, to the VIPs it hears nobody
	// answer for.
	silent := map[netip.Addr]map[netip.Addr]bool{}
	for _, o := range objs {
		n, ok := o.(*corev1.Node)
		if !ok || n.Name == s.o.NodeName || n.Annotations[v1alpha1.AnnotationNodeWire] == "" {
			continue
		}
		views, err := v1alpha1.ParseWireViews(n.Annotations[v1alpha1.AnnotationNodeWire])
		if err != nil {
			continue
		}
		none := map[netip.Addr]bool{}
		for _, v := range views {
			if a, err := netip.ParseAddr(v.Address); err == nil && v.Answers == 0 && now.Sub(v.At) < v1alpha1.WireViewFresh {
				none[a] = true
			}
		}
		if len(none) == 0 {
			continue
		}
		for _, na := range n.Status.Addresses {
			if a, err := netip.ParseAddr(na.Address); err == nil {
				silent[a.Unmap()] = none
			}
		}
	}
	if len(silent) == 0 {
		return nil
	}
	out := map[string][]netip.Addr{}
	for a, inst := range tg.instances {
		// Only what this node holds: the others may be speaking of a
		// moment it did not.
		if !local[a] {
			continue
		}
		peers := tg.peersOf[a]
		if len(peers) > 0 && !slices.ContainsFunc(peers, func(p netip.Addr) bool { return !silent[p][a] }) {
			out[inst] = append(out[inst], a)
		}
	}
	for _, vips := range out {
		slices.SortFunc(vips, netip.Addr.Compare)
	}
	return out
}

// reannounce announces the VIPs nobody hears again, as keepalived does
// for a new master, and says so on the Node.
func (s *Sidecar) reannounce(iface, inst string, addrs []netip.Addr) {
	err := s.o.InNetns(func() error { return dataplane.Announce(iface, addrs, onnode.GARPRepeat) })
	if err != nil {
		s.m.Failures.WithLabelValues("heal").Inc()
		s.log.Error("cannot announce the VIPs nobody hears again", "instance", inst, "err", err)
	}
	s.m.Heal.WithLabelValues("reannounce").Inc()
	msg := fmt.Sprintf("the other members of %s hear nobody answer for %s, which this node holds: announced again on %s (gratuitous ARP / neighbour advertisement); should they still hear nobody, this node steps down; see the runbook of the alert VipctlVIPUnanswered",
		inst, joinAddrs(addrs), iface)
	s.log.Warn(msg)
	s.rec.Event(s.nodeRef, corev1.EventTypeWarning, ReasonVIPReannounced, msg)
}

// stepDown gives the instance's VIPs to a member that is heard, and
// tells whether it could.
func (s *Sidecar) stepDown(inst string, addrs []netip.Addr, waited time.Duration) bool {
	if err := s.o.WriteFlag(onnode.UnheardFile(inst), true); err != nil {
		s.m.Failures.WithLabelValues("heal").Inc()
		s.log.Error("cannot step down", "instance", inst, "err", err)
		return false
	}
	s.m.Heal.WithLabelValues("step-down").Inc()
	msg := fmt.Sprintf("the other members of %s still hear nobody answer for %s %s after this node announced it again: it steps down (its priority there is 1 for %s) so that a member they hear takes over; see the runbook of the alert VipctlVIPUnanswered",
		inst, joinAddrs(addrs), waited.Round(time.Second), healHold)
	s.log.Warn(msg)
	s.rec.Event(s.nodeRef, corev1.EventTypeWarning, ReasonVIPSteppedDown, msg)
	return true
}

func joinAddrs(addrs []netip.Addr) string {
	out := make([]string, len(addrs))
	for i, a := range addrs {
		out[i] = a.String()
	}
	return strings.Join(out, ", ")
}
