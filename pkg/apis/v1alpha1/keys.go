package v1alpha1

import (
	"fmt"
	"strconv"
	"strings"
)

// InstanceKey names one VRRP instance of a cluster. It is the name users
// write in spec.vrrp.virtualRouterIDs, vr-ids prints, the sidecar publishes
// in its Node's vipctl.io/vips annotation and status shows: every package
// builds keys with the functions below and nowhere else, so the four can
// never disagree.
//
//	api                     the API VIPs
//	api-int                 api-int's own VIPs (spec.api.internalVIPs)
//	ingress                 the default IngressController (OpenShift's ingress ID)
//	ingress/<controller>    any other IngressController
//	pool/<pool>/<n>         the n-th instance of a service pool
//	service/<ns>/<name>     a Service with externalTrafficPolicy Local
//	bgp/<pool>              the routes a node announces for a bgp pool
//	                        (no VRRP instance, no VRRP ID: published and
//	                        shown only)
type InstanceKey string

// The keys whose VRRP IDs OpenShift computes.
const (
	KeyAPI     InstanceKey = "api"
	KeyIngress InstanceKey = "ingress"
)

// KeyAPIInternal is api-int's own VRRP instance (spec.api.internalVIPs),
// named as OpenShift names the internal API's DNS record. OpenShift has no
// such instance, so its ID is derived like any other of vipctl's.
const KeyAPIInternal InstanceKey = "api-int"

const (
	poolPrefix    = "pool/"
	servicePrefix = "service/"
	bgpPrefix     = "bgp/"
)

func (k InstanceKey) String() string { return string(k) }

// IngressKey is the key of an IngressController: "ingress" for the default
// one (OpenShift's IngressVirtualRouterID), "ingress/<name>" for the others.
func IngressKey(controller string) InstanceKey {
	if controller == DefaultIngressController {
		return KeyIngress
	}
	return KeyIngress + "/" + InstanceKey(controller)
}

// PoolKey is the key of the n-th instance of a service pool.
func PoolKey(pool string, n int) InstanceKey {
	return InstanceKey(fmt.Sprintf("%s%s/%d", poolPrefix, pool, n))
}

// ServiceKey is the key of a Service with externalTrafficPolicy Local,
// named namespace/name. Its VRRP ID is derived after every key of the
// config, so Services coming and going never move a configured ID.
func ServiceKey(namespacedName string) InstanceKey {
	return InstanceKey(servicePrefix + namespacedName)
}

// BGPKey is the key under which a node publishes the routes it announces
// for a bgp pool. It is not a VRRP instance and never gets a VRRP ID.
func BGPKey(pool string) InstanceKey {
	return InstanceKey(bgpPrefix + pool)
}

// BGPPool tells which bgp pool k names; ok is false for any other kind of
// key.
func (k InstanceKey) BGPPool() (pool string, ok bool) {
	return strings.CutPrefix(string(k), bgpPrefix)
}

// Pool tells which pool and instance k names; ok is false for any other
// kind of key.
func (k InstanceKey) Pool() (pool string, n int, ok bool) {
	rest, found := strings.CutPrefix(string(k), poolPrefix)
	if !found {
		return "", 0, false
	}
	i := strings.LastIndexByte(rest, '/')
	if i <= 0 {
		return "", 0, false
	}
	n, err := strconv.Atoi(rest[i+1:])
	if err != nil || n < 0 {
		return "", 0, false
	}
	return rest[:i], n, true
}

// Service tells which Service k names; ok is false for any other kind of
// key.
func (k InstanceKey) Service() (namespace, name string, ok bool) {
	rest, found := strings.CutPrefix(string(k), servicePrefix)
	if !found {
		return "", "", false
	}
	return strings.Cut(rest, "/")
}

// Strings lists keys as plain strings, for messages.
func Strings(keys []InstanceKey) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k.String()
	}
	return out
}
