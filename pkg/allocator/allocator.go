// Package allocator hands out service-pool addresses to Services of type
// LoadBalancer. The Allocator is pure bookkeeping (no API access, so it is
// tested exhaustively); the Controller around it watches Services and the
// vipctl ConfigMap, holds the leader Lease and writes Service status.
package allocator

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
)

// Reason classifies an allocation failure; it is the Event reason's suffix
// and the failures metric's label.
type Reason string

// Reasons an allocation fails.
const (
	ReasonExhausted   Reason = "PoolExhausted"
	ReasonNotInPool   Reason = "NotInPool"
	ReasonInUse       Reason = "IPInUse"
	ReasonNoPool      Reason = "NoPool"
	ReasonNotAllowed  Reason = "PoolNotAllowed"
	ReasonFamily      Reason = "FamilyUnavailable"
	ReasonBadRequest  Reason = "BadRequest"
	ReasonAnchor      Reason = "AnchorAddress"
	ReasonReserved    Reason = "ReservedAddress"
	ReasonNSLimit     Reason = "NamespaceLimit"
	reasonUnknownPool Reason = "UnknownPool"
)

// reasons are every Reason, for the failures metric's series to exist at
// 0 from the start: an alert on their increase sees the first failure.
var reasons = []Reason{ReasonExhausted, ReasonNotInPool, ReasonInUse, ReasonNoPool, ReasonNotAllowed, ReasonFamily,
	ReasonBadRequest, ReasonAnchor, ReasonReserved, ReasonNSLimit, reasonUnknownPool}

// Error is an allocation failure with its reason.
type Error struct {
	Reason Reason
	Msg    string
}

func (e *Error) Error() string { return e.Msg }

func fail(r Reason, format string, args ...any) error {
	return &Error{Reason: r, Msg: fmt.Sprintf(format, args...)}
}

// ReasonOf returns the reason of an allocation error ("" for nil, "Error"
// for anything else).
func ReasonOf(err error) Reason {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return "Error"
}

// Family is an IP family a Service asks for.
type Family int

// IP families.
const (
	IPv4 Family = 4
	IPv6 Family = 6
)

func familyOf(a netip.Addr) Family {
	if a.Is4() {
		return IPv4
	}
	return IPv6
}

// Port is one port a Service exposes; sharing an address needs distinct
// ports.
type Port struct {
	Protocol string
	Port     int32
}

// Request is what the allocator needs to know about one Service.
type Request struct {
	// Key is namespace/name.
	Key       string
	Namespace string
	Labels    map[string]string
	// Pool is the pool the Service names (vipctl.io/pool), or "".
	Pool string
	// Requested are addresses asked for by spec.loadBalancerIP or
	// vipctl.io/load-balancer-ips; they must come from a pool that admits
	// the Service (autoAssign off does not matter for them).
	Requested []netip.Addr
	// Families in preference order; Required says every one is needed
	// (RequireDualStack, or SingleStack with one family), otherwise the
	// first that can be served and then as many more as possible
	// (PreferDualStack).
	Families []Family
	Required bool
	// SharingKey lets Services with the same key share an address when
	// their ports differ (vipctl.io/allow-shared-ip).
	SharingKey string
	Ports      []Port
	// Backend says where the Service's traffic may be taken in
	// (BackendKey): Services share an address only when theirs are equal.
	Backend string
}

type pool struct {
	*cluster.Pool
	// next is where the search for a free address starts, per range: the
	// addresses below it were taken when it last moved (a release moves it
	// back), so allocating N addresses costs O(N), not O(N²).
	next []netip.Addr
}

func (p *pool) admits(r *Request) bool {
	if !p.AdmitsNamespace(r.Namespace) {
		return false
	}
	return cluster.Matches(p.ServiceSelector, r.Labels)
}

func (p *pool) autoAssign() bool { return p.AutoAssign == nil || *p.AutoAssign }

// holding is one address and the Services on it.
type holding struct {
	sharingKey string
	users      map[string][]Port
	// backends is each user's Request.Backend.
	backends map[string]string
}

// Allocator is the bookkeeping of who holds which pool address. It is not
// safe for concurrent use; the controller serialises access.
type Allocator struct {
	// set and pools hold the same pools in declaration order: set
	// answers which pool holds an address, pools keeps the search state.
	set    cluster.Pools
	pools  []*pool
	byAddr map[netip.Addr]*holding
	bySvc  map[string][]netip.Addr
	// reserved are never given out, and why (v1alpha1.ReservedAddresses).
	reserved map[netip.Addr]string
}

// SetReserved names the addresses never to give out, whatever the pools
// say: a pool written before validate refused it may still hold its
// machine network's broadcast address.
func (a *Allocator) SetReserved(list []v1alpha1.Reserved) {
	a.reserved = make(map[netip.Addr]string, len(list))
	for _, r := range list {
		a.reserved[r.Addr] = r.Why
	}
}

// namespaceOf is the namespace part of a namespace/name key.
func namespaceOf(key string) string {
	ns, _, _ := strings.Cut(key, "/")
	return ns
}

// New creates an allocator over the pools (declaration order matters: the
// first pool that admits a Service serves it).
func New(pools []v1alpha1.ServicePool) *Allocator {
	a := &Allocator{byAddr: map[netip.Addr]*holding{}, bySvc: map[string][]netip.Addr{}}
	a.SetPools(pools)
	return a
}

// HoldingReserved lists the Services (namespace/name) that hold an
// address now reserved: their next sync gives them another.
func (a *Allocator) HoldingReserved() []string {
	var keys []string
	for ad, h := range a.byAddr {
		if _, ok := a.reserved[ad]; !ok {
			continue
		}
		for k := range h.users {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	slices.Sort(keys)
	return keys
}

// SetPools replaces the pools. Existing assignments stay, also those now
// outside every pool (see Orphans): releasing them is `vipctl update
// --force`'s decision, not the allocator's.
func (a *Allocator) SetPools(pools []v1alpha1.ServicePool) {
	a.set = cluster.CompilePools(pools)
	a.pools = make([]*pool, 0, len(a.set))
	for _, cp := range a.set {
		p := &pool{Pool: cp}
		for _, r := range cp.Ranges {
			p.next = append(p.next, r.First)
		}
		a.pools = append(a.pools, p)
	}
}

// PoolOf names the pool containing addr, or "".
func (a *Allocator) PoolOf(addr netip.Addr) string {
	if p := a.set.Of(addr); p != nil {
		return p.Name
	}
	return ""
}

// Addresses returns what a Service holds.
func (a *Allocator) Addresses(key string) []netip.Addr {
	return slices.Clone(a.bySvc[key])
}

// Orphans lists the Services holding an address outside every pool.
func (a *Allocator) Orphans() map[string][]netip.Addr {
	out := map[string][]netip.Addr{}
	for key, addrs := range a.bySvc {
		for _, ad := range addrs {
			if a.PoolOf(ad) == "" {
				out[key] = append(out[key], ad)
			}
		}
	}
	return out
}

// InUse counts the addresses in use per pool.
func (a *Allocator) InUse() map[string]int {
	out := map[string]int{}
	for _, p := range a.pools {
		out[p.Name] = 0
	}
	for ad := range a.byAddr {
		if name := a.PoolOf(ad); name != "" {
			out[name]++
		}
	}
	return out
}

// Assign records addresses a Service already has (its status, at start-up
// or after a leader change). An address held by another Service it may not
// share is refused, which is how a duplicate left behind is detected.
func (a *Allocator) Assign(r Request, addrs []netip.Addr) error {
	for _, ad := range addrs {
		if err := a.canUse(ad, &r, false); err != nil {
			return err
		}
	}
	a.Release(r.Key)
	for _, ad := range addrs {
		a.take(ad, &r)
	}
	return nil
}

func (a *Allocator) take(addr netip.Addr, r *Request) {
	h, ok := a.byAddr[addr]
	if !ok {
		h = &holding{users: map[string][]Port{}, backends: map[string]string{}}
		a.byAddr[addr] = h
	}
	if _, mine := h.users[r.Key]; len(h.users) == 0 || (mine && len(h.users) == 1) {
		h.sharingKey = r.SharingKey
	}
	h.users[r.Key] = slices.Clone(r.Ports)
	h.backends[r.Key] = r.Backend
	if !slices.Contains(a.bySvc[r.Key], addr) {
		a.bySvc[r.Key] = append(a.bySvc[r.Key], addr)
	}
}

// Release frees what a Service holds.
func (a *Allocator) Release(key string) {
	for _, ad := range a.bySvc[key] {
		if h, ok := a.byAddr[ad]; ok {
			delete(h.users, key)
			delete(h.backends, key)
			if len(h.users) == 0 {
				delete(a.byAddr, ad)
				a.rewind(ad)
			}
		}
	}
	delete(a.bySvc, key)
}

// rewind lets the free-address search find a released address again.
func (a *Allocator) rewind(ad netip.Addr) {
	for _, p := range a.pools {
		for i, rg := range p.Ranges {
			if rg.Contains(ad) && ad.Less(p.next[i]) {
				p.next[i] = ad
			}
		}
	}
}

// Allocate gives the Service its addresses, one per family it gets, and
// records them. A Service that already holds addresses that still satisfy
// the request keeps them. On error nothing changes.
func (a *Allocator) Allocate(r Request) ([]netip.Addr, error) {
	if len(r.Families) == 0 {
		return nil, fail(ReasonBadRequest, "no IP family requested")
	}
	if cur := a.bySvc[r.Key]; len(cur) > 0 && a.satisfies(&r, cur) {
		// Same addresses, but the sharing key and ports may have changed.
		for _, ad := range cur {
			a.take(ad, &r)
		}
		return slices.Clone(cur), nil
	}
	candidates, err := a.candidatePools(&r)
	if err != nil {
		return nil, err
	}
	if candidates, err = a.underLimit(&r, candidates); err != nil {
		return nil, err
	}
	var out []netip.Addr
	if len(r.Requested) > 0 {
		out, err = a.requested(&r, candidates)
	} else {
		out, err = a.pick(&r, candidates)
	}
	if err != nil {
		return nil, err
	}
	a.Release(r.Key)
	for _, ad := range out {
		a.take(ad, &r)
	}
	return out, nil
}

// satisfies tells whether cur still fits r: in pools that admit it, each
// requested address present, the families right, and shareable.
func (a *Allocator) satisfies(r *Request, cur []netip.Addr) bool {
	if len(r.Requested) > 0 {
		if len(cur) != len(r.Requested) {
			return false
		}
		for _, ad := range r.Requested {
			if !slices.Contains(cur, ad) {
				return false
			}
		}
	} else {
		for _, ad := range cur {
			if !slices.Contains(r.Families, familyOf(ad)) {
				return false
			}
		}
		if r.Required && len(cur) != len(r.Families) {
			return false
		}
	}
	for _, ad := range cur {
		p := a.poolFor(ad)
		if p == nil || !p.admits(r) || (r.Pool != "" && p.Name != r.Pool) || p.IsAnchor(ad) {
			return false
		}
		if _, ok := a.reserved[ad]; ok {
			return false
		}
		// An address r already has keeps it whatever the Backend rule
		// says (Incompatible warns); a new one must follow it.
		if a.canUse(ad, r, false) != nil {
			return false
		}
	}
	return true
}

func (a *Allocator) poolFor(addr netip.Addr) *pool {
	cp := a.set.Of(addr)
	for _, p := range a.pools {
		if p.Pool == cp {
			return p
		}
	}
	return nil
}

// candidatePools are the pools that may serve r, in order.
func (a *Allocator) candidatePools(r *Request) ([]*pool, error) {
	if r.Pool != "" {
		for _, p := range a.pools {
			if p.Name == r.Pool {
				if !p.admits(r) {
					return nil, fail(ReasonNotAllowed, "pool %s does not admit %s (namespaces %v, serviceSelector %v)", p.Name, r.Key, p.Namespaces, p.ServiceSelector)
				}
				return []*pool{p}, nil
			}
		}
		return nil, fail(ReasonNoPool, "pool %q does not exist", r.Pool)
	}
	var out []*pool
	for _, p := range a.pools {
		if p.admits(r) && (len(r.Requested) > 0 || p.autoAssign()) {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return nil, fail(ReasonNoPool, "no pool with autoAssign admits %s", r.Key)
	}
	return out, nil
}

// underLimit drops the pools where r's namespace already has
// maxPerNamespace other Services.
func (a *Allocator) underLimit(r *Request, candidates []*pool) ([]*pool, error) {
	out := make([]*pool, 0, len(candidates))
	var full []string
	for _, p := range candidates {
		if p.MaxPerNamespace > 0 && a.namespaceUsers(p, r.Namespace, r.Key) >= p.MaxPerNamespace {
			full = append(full, fmt.Sprintf("%s (maxPerNamespace %d)", p.Name, p.MaxPerNamespace))
			continue
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, fail(ReasonNSLimit, "namespace %s already has as many Services as it may in pool(s) %s", r.Namespace, strings.Join(full, ", "))
	}
	return out, nil
}

// namespaceUsers counts the Services of ns, except, holding an address of p.
func (a *Allocator) namespaceUsers(p *pool, ns, except string) int {
	n := 0
	for key, addrs := range a.bySvc {
		if key == except || namespaceOf(key) != ns {
			continue
		}
		if usesPool(addrs, p) {
			n++
		}
	}
	return n
}

// usesPool tells whether a Service holding addrs counts against p's
// maxPerNamespace.
func usesPool(addrs []netip.Addr, p *pool) bool { return slices.ContainsFunc(addrs, p.Contains) }

// NamespaceUsers counts, for every pool with a maxPerNamespace, the
// Services of each namespace holding one of its addresses: what the cap
// is checked against. Namespaces with none are left out.
func (a *Allocator) NamespaceUsers() map[string]map[string]int {
	out := map[string]map[string]int{}
	for _, p := range a.pools {
		if p.MaxPerNamespace > 0 {
			out[p.Name] = map[string]int{}
		}
	}
	for key, addrs := range a.bySvc {
		for _, p := range a.pools {
			if p.MaxPerNamespace > 0 && usesPool(addrs, p) {
				out[p.Name][namespaceOf(key)]++
			}
		}
	}
	return out
}

func (a *Allocator) requested(r *Request, candidates []*pool) ([]netip.Addr, error) {
	seen := map[Family]bool{}
	for _, ad := range r.Requested {
		f := familyOf(ad)
		if seen[f] {
			return nil, fail(ReasonBadRequest, "two %v addresses requested: one per family", f)
		}
		seen[f] = true
		idx := slices.IndexFunc(candidates, func(p *pool) bool { return p.Contains(ad) })
		if idx < 0 {
			if p := a.poolFor(ad); p != nil {
				return nil, fail(ReasonNotAllowed, "requested %s is in pool %s, which does not serve %s", ad, p.Name, r.Key)
			}
			return nil, fail(ReasonNotInPool, "requested %s is outside every pool", ad)
		}
		if why, ok := a.reserved[ad]; ok {
			return nil, fail(ReasonReserved, "requested %s is %s and is never given to a Service", ad, why)
		}
		if candidates[idx].IsAnchor(ad) {
			return nil, fail(ReasonAnchor, "requested %s anchors a VRRP instance of pool %s and is never given to a Service", ad, candidates[idx].Name)
		}
		if err := a.canUse(ad, r, true); err != nil {
			return nil, err
		}
	}
	return slices.Clone(r.Requested), nil
}

// pick chooses free (or shareable) addresses for r's families.
func (a *Allocator) pick(r *Request, candidates []*pool) ([]netip.Addr, error) {
	var out []netip.Addr
	var missing []Family
	for _, f := range r.Families {
		ad, ok := a.first(r, candidates, f)
		if !ok {
			missing = append(missing, f)
			continue
		}
		out = append(out, ad)
	}
	if len(out) == 0 || (r.Required && len(missing) > 0) {
		names := make([]string, 0, len(candidates))
		for _, p := range candidates {
			names = append(names, p.Name)
		}
		for _, f := range missing {
			if !slices.ContainsFunc(candidates, func(p *pool) bool {
				return slices.ContainsFunc(p.Ranges, func(rg v1alpha1.AddressRange) bool { return familyOf(rg.First) == f })
			}) {
				return nil, fail(ReasonFamily, "no pool for %s (%s) has IPv%d addresses", r.Key, strings.Join(names, ", "), f)
			}
		}
		return nil, fail(ReasonExhausted, "pool(s) %s have no free IPv%d address for %s", strings.Join(names, ", "), missing[0], r.Key)
	}
	return out, nil
}

// first finds, in pool order, an address of family f that r may take:
// one already shared under r's key first, then the lowest free one. A
// pool's anchors are never taken.
func (a *Allocator) first(r *Request, candidates []*pool, f Family) (netip.Addr, bool) {
	if r.SharingKey != "" {
		for ad, h := range a.byAddr {
			if h.sharingKey == r.SharingKey && familyOf(ad) == f && a.canUse(ad, r, true) == nil {
				if p := a.poolFor(ad); p != nil && slices.Contains(candidates, p) {
					return ad, true
				}
			}
		}
	}
	for _, p := range candidates {
		for _, rg := range p.Ranges {
			if familyOf(rg.First) != f {
				continue
			}
			for ad := rg.First; rg.Contains(ad); ad = ad.Next() {
				_, reserved := a.reserved[ad]
				if _, used := a.byAddr[ad]; !used && !reserved && !p.IsAnchor(ad) {
					return ad, true
				}
				if !ad.Next().IsValid() {
					break
				}
			}
		}
	}
	return netip.Addr{}, false
}
