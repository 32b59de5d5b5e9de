package sidecar

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/onnode"
)

// reportUnannounced says which Local Services got no VRRP instance: a
// log line and a gauge on every node, and a Warning Event on the Service
// from each node that runs a ready endpoint of it (so its owner sees it
// with kubectl describe, from a few nodes rather than all), once per
// Service until it is announced again.
func (s *Sidecar) reportUnannounced(list []cluster.LocalService) {
	s.m.Unannounced.Set(float64(len(list)))
	now := make(map[string]bool, len(list))
	for _, ls := range list {
		now[ls.Name] = true
		if s.unannounced[ls.Name] {
			continue
		}
		msg := fmt.Sprintf("no VRRP ID is free for Service %s (externalTrafficPolicy Local): its VIP is not announced until one frees up; every other VIP is unaffected", ls.Name)
		s.log.Warn(msg)
		if slices.Contains(ls.Nodes, s.nodeRef.Name) {
			ns, name, _ := strings.Cut(ls.Name, "/")
			s.rec.Event(&corev1.ObjectReference{Kind: "Service", APIVersion: "v1", Namespace: ns, Name: name}, corev1.EventTypeWarning, "VIPNotAnnounced", msg)
		}
	}
	s.unannounced = now
}

// reportMissingInterfaces says which pools and IngressControllers this
// node holds no VIP of because it lacks the interface they live on: a
// gauge per owner, a log line and a Warning Event on the Node once per
// owner and reason until it is resolved. The node's other VIPs are
// rendered as ever.
func (s *Sidecar) reportMissingInterfaces(list []onnode.MissingInterface) {
	now := make(map[onnode.MissingInterface]bool, len(list))
	for _, m := range list {
		now[m] = true
		s.m.InterfaceMissing.WithLabelValues(m.Owner).Set(1)
		if s.missingIfaces[m] {
			continue
		}
		s.log.Warn("VIPs left out: the interface they live on is missing here", "owner", m.Owner, "why", m.Why)
		s.rec.Event(s.nodeRef, corev1.EventTypeWarning, "VIPInterfaceMissing", truncate(m.String()))
	}
	for m := range s.missingIfaces {
		if !slices.ContainsFunc(list, func(o onnode.MissingInterface) bool { return o.Owner == m.Owner }) {
			s.m.InterfaceMissing.DeleteLabelValues(m.Owner)
		}
	}
	s.missingIfaces = now
}

// reportProxyPending logs which Local Services' endpoints here the node's
// service proxy does not deliver to yet, when that changes, and sets the
// gauge.
func (s *Sidecar) reportProxyPending(pending map[string]bool) {
	s.m.ProxyPending.Set(float64(len(pending)))
	if maps.Equal(pending, s.proxyPending) {
		return
	}
	for name := range pending {
		if !s.proxyPending[name] {
			s.log.Info("a ready endpoint of this Local Service runs here, but the node's service proxy counts none yet: its VIP is held here at priority 1 until it does", "service", name)
		}
	}
	for name := range s.proxyPending {
		if !pending[name] {
			s.log.Info("the node's service proxy delivers this Local Service's endpoints here now", "service", name)
		}
	}
	s.proxyPending = pending
}
