package allocator

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Backend keys (Request.Backend). Two Services share an address only
// when their keys are equal, the rule MetalLB applies (v0.16.1,
// internal/allocator/k8salloc BackendKey), stricter in one case: a Local
// Service without a selector shares with nobody, where MetalLB lets it
// share with Cluster Services.
const (
	backendCluster = "cluster"
	backendLocal   = "local:"
	backendManual  = "local, no selector:"
)

// BackendKey says where a Service's traffic may be taken in. An address
// is announced from the nodes one policy picks: for externalTrafficPolicy
// Cluster any node (kube-proxy forwards to every endpoint), for Local only
// nodes with a ready endpoint of the Service (kube-proxy drops the rest).
// Services on one address are reached through the same nodes, so they
// must agree: all Cluster, or all Local with the same pod selector (the
// same endpoints' nodes). A Local Service without a selector has
// endpoints someone writes by hand: its key is its own.
func BackendKey(s *corev1.Service) string {
	if s.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal {
		return backendCluster
	}
	if len(s.Spec.Selector) == 0 {
		return backendManual + s.Namespace + "/" + s.Name
	}
	return backendLocal + labels.Set(s.Spec.Selector).String()
}

// clashWhy ends every refusal of the Backend rule.
const clashWhy = "an address is announced from the nodes one traffic policy picks, and kube-proxy drops the other's traffic on some of them; Services share an address only when both are externalTrafficPolicy Cluster, or both Local with the same selector"

// backendClash says in words how two Backend keys differ.
func backendClash(mine, theirs string) string {
	return fmt.Sprintf("this Service is %s and it is %s", describeBackend(mine), describeBackend(theirs))
}

func describeBackend(k string) string {
	if k == backendCluster {
		return "externalTrafficPolicy Cluster"
	}
	if strings.HasPrefix(k, backendManual) {
		return "externalTrafficPolicy Local without a selector"
	}
	if sel, ok := strings.CutPrefix(k, backendLocal); ok {
		return fmt.Sprintf("externalTrafficPolicy Local with selector %q", sel)
	}
	return fmt.Sprintf("%q", k)
}

// EventSharingIncompatible is the reason of the Warning Event on a Service
// that keeps an address it shares with a Service BackendKey says it may
// not share with: recorded before vipctl had the rule, or one of them
// changed its traffic policy or selector since.
const EventSharingIncompatible = "SharingIncompatible"

// warnIncompatible reports each such share of s, whose request is r;
// nothing is released.
func (t *term) warnIncompatible(s *corev1.Service, r *Request) {
	for ad, users := range t.alloc.Incompatible(r.Key) {
		t.rec.Event(s, corev1.EventTypeWarning, EventSharingIncompatible, truncate(fmt.Sprintf(
			"%s is shared with %s, whose traffic policy or selector differs (%s): %s; it is kept, give one of them its own address",
			ad, strings.Join(users, ", "), backendClash(r.Backend, t.alloc.backendOf(ad, users[0])), clashWhy)))
	}
}

// backendOf is the Backend a user of addr was recorded with.
func (a *Allocator) backendOf(addr netip.Addr, user string) string {
	if h, ok := a.byAddr[addr]; ok {
		return h.backends[user]
	}
	return ""
}

// Incompatible lists, per address of the Service, the other Services on
// it whose Backend differs from the Service's (a share recorded before
// the rule, or a Service whose traffic policy or selector changed since):
// the controller warns about them, and never takes the address away.
func (a *Allocator) Incompatible(key string) map[netip.Addr][]string {
	var out map[netip.Addr][]string
	for _, ad := range a.bySvc[key] {
		h := a.byAddr[ad]
		for _, user := range sortedKeys(h.users) {
			if user != key && h.backends[user] != h.backends[key] {
				if out == nil {
					out = map[netip.Addr][]string{}
				}
				out[ad] = append(out[ad], user)
			}
		}
	}
	return out
}

// canUse tells whether r may take addr: free, or shared under r's key with
// no clashing port and, when backends is set, with the same Backend as
// every other user. Assign leaves the Backend rule out (an address a
// Service already has in its status is not taken from it); a Service
// that keeps a share that breaks it is warned (Incompatible).
func (a *Allocator) canUse(addr netip.Addr, r *Request, backends bool) error {
	h, ok := a.byAddr[addr]
	if !ok {
		return nil
	}
	others := make(map[string][]Port, len(h.users))
	for k, v := range h.users {
		if k != r.Key {
			others[k] = v
		}
	}
	if len(others) == 0 {
		return nil
	}
	if r.SharingKey == "" || h.sharingKey != r.SharingKey {
		return fail(ReasonInUse, "%s is in use by %s", addr, strings.Join(sortedKeys(others), ", "))
	}
	// The annotation's key is free text any Service owner writes: without
	// this, a Service in another namespace could join a victim's address.
	if p := a.poolFor(addr); p == nil || !p.ShareAcrossNamespaces {
		for _, user := range sortedKeys(others) {
			if namespaceOf(user) != r.Namespace {
				return fail(ReasonInUse, "%s is shared under key %q by %s in another namespace; its pool shares addresses only within one namespace (shareAcrossNamespaces)", addr, r.SharingKey, user)
			}
		}
	}
	for user, ports := range others {
		for _, p := range ports {
			if slices.Contains(r.Ports, p) {
				return fail(ReasonInUse, "%s is shared under key %q but %s already uses %s/%d", addr, r.SharingKey, user, p.Protocol, p.Port)
			}
		}
	}
	if backends {
		for _, user := range sortedKeys(others) {
			if b := h.backends[user]; b != r.Backend {
				return fail(ReasonInUse, "%s is shared under key %q by %s, but %s: %s", addr, r.SharingKey, user, backendClash(r.Backend, b), clashWhy)
			}
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
