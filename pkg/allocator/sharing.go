package allocator

import (
	"fmt"
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

// warnIncompatible reports each such share of s; nothing is released.
func (t *term) warnIncompatible(s *corev1.Service, key string) {
	for ad, users := range t.alloc.Incompatible(key) {
		t.rec.Event(s, corev1.EventTypeWarning, EventSharingIncompatible, truncate(fmt.Sprintf(
			"%s is shared with %s, whose traffic policy or selector differs (%s): %s; it is kept, give one of them its own address",
			ad, strings.Join(users, ", "), backendClash(BackendKey(s), t.alloc.backendOf(ad, users[0])), clashWhy)))
	}
}
