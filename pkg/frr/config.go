package frr

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"text/template"

	"github.com/Masterminds/sprig/v3"
	"github.com/vipctl/vipctl/pkg/configcheck"
)

// Config is what one node's frr.conf says: its BGP sessions and the /32
// and /128 routes it announces. pkg/render fills it from the plan, and
// Write turns it into the file through frr.conf.tmpl.
type Config struct {
	Node     string
	ASN      uint32
	RouterID string
	Peers    []Peer
	// Families are ipv4 and/or ipv6, each with its peers and networks;
	// a family without peers is left out.
	Families []Family
	// Backup4 and Backup6 are the backup routes, which frr.conf lists in
	// the prefix-lists vipctl-backup4 and vipctl-backup6 for the outbound
	// route-maps to match. A route turning into a backup keeps its
	// network line: frr-reload.py would replace a changed one by
	// withdrawing it first (seen in the cluster lab: ~0.5 s without a
	// route).
	Backup4, Backup6 []string
	// Held4 and Held6 are the routed VIPs (spec.api.routed, an
	// IngressController's routed) of the instances this node is a member of, as host prefixes: frr.conf
	// redistributes the connected route of each while the VIP is on one
	// of the node's interfaces, that is while keepalived holds it here.
	Held4, Held6 []string
	// Multihop tells whether a peer is hops away: frr.conf then lets
	// next-hop tracking resolve through the default route.
	Multihop bool
	// GracefulRestart tells whether a peer restarts gracefully: frr.conf
	// then says the node keeps its forwarding state across a restart, and
	// announces RestartTime (seconds).
	GracefulRestart bool
	RestartTime     int
	// PrefixLists are the pools' ranges and the peers' outbound filters;
	// RouteMaps the outbound route-maps (pkg/render's bgppolicy.go).
	PrefixLists []PrefixList
	RouteMaps   []RouteMap
}

// Peer is one BGP session of the node.
type Peer struct {
	// Address is the router's address, or with Interface the node's
	// interface the router is on (an unnumbered session).
	Address   string
	Interface bool
	// IPv6 tells a session that runs over IPv6 (an unnumbered one
	// does); DualStack one to an address that carries both families'
	// routes (over IPv6 it negotiates the extended next hop for IPv4).
	IPv6, DualStack bool
	ASN             uint32
	Hold, Keepalive int
	BFD             bool
	// Password is the session's TCP MD5 password ("" none, or not read
	// yet: cluster.State.BGPPasswords).
	Password string
	// Multihop is the eBGP session's TTL for a router hops away (0:
	// directly connected).
	Multihop int32
	// IBGP tells a peer in the nodes' own AS.
	IBGP bool
	// GracefulRestart: graceful restart with this peer (and, with BFD,
	// its control-plane failure check).
	GracefulRestart bool
}

// Links are the interfaces of the node's unnumbered peers, each once.
func (v *Config) Links() []string {
	var out []string
	for _, p := range v.Peers {
		if p.Interface && !slices.Contains(out, p.Address) {
			out = append(out, p.Address)
		}
	}
	return out
}

// HasPassword tells whether frr.conf holds a password, and so is
// written for root alone.
func (v *Config) HasPassword() bool {
	return slices.ContainsFunc(v.Peers, func(p Peer) bool { return p.Password != "" })
}

// Family is one address family's part of the BGP config.
type Family struct {
	Name     string // ipv4, ipv6
	Peers    []FamilyPeer
	Networks []string
	// Held: the family redistributes the held routed VIPs (Held4 or
	// Held6).
	Held bool
}

// FamilyPeer is a peer in its address family: its outbound route-map
// and, where a pool's bgp.peers leaves it out, its outbound prefix-list.
type FamilyPeer struct {
	Address, RouteMap, Filter string
}

// PrefixList is one prefix-list's lines.
type PrefixList struct {
	Family string // ip, ipv6
	Name   string
	Lines  []string
}

// RouteMap is one route-map's entries, in order; every entry permits.
type RouteMap struct {
	Name    string
	Entries []RouteMapEntry
}

// RouteMapEntry is one permit entry of a route-map.
type RouteMapEntry struct {
	Seq int
	// Match is the entry's one match clause ("" matches every route).
	Match string
	Sets  []string
	// Goto is the entry's on-match goto (0: none, the route-map ends).
	Goto int
}

//go:embed frr.conf.tmpl
var configTemplate string

// parsed is the template with sprig's function map (the house style:
// no hand-written helpers) and missingkey=error; a broken template fails
// every test at once.
var parsed = template.Must(template.New("frr").Option("missingkey=error").
	Funcs(sprig.TxtFuncMap()).Parse(configTemplate))

// Write renders c as frr.conf to w.
func Write(w io.Writer, c *Config) error {
	if err := parsed.ExecuteTemplate(w, "frr.conf", c); err != nil {
		return fmt.Errorf("rendering frr.conf: %w", err)
	}
	return nil
}

// Check has the real vtysh judge a frr.conf with `vtysh -C -f` (a dry run: vtysh parses every
// line with the grammar of the daemons it was built with and applies
// nothing, so no daemon need be running). It needs no interface, so it
// runs wherever vipctl runs. vtysh reads its own vtysh.conf first and
// complains when there is none (a node's /etc/frr is vipctl's, holding
// frr.conf only), so it is pointed at an empty one beside the candidate.
func Check(ctx context.Context, conf []byte, o configcheck.Options) error {
	return configcheck.WithFile("frr.conf", conf, func(path string) error {
		dir := filepath.Dir(path)
		if err := os.WriteFile(filepath.Join(dir, "vtysh.conf"), nil, 0o600); err != nil {
			return err
		}
		out, err := (configcheck.Options{}).Run(ctx, o.Binary(o.Vtysh, "vtysh"), "--config_dir", dir, "-C", "-f", path)
		if err != nil || len(bytes.TrimSpace(out)) > 0 {
			return fmt.Errorf("vtysh -C: %s", configcheck.Diagnose(out, err))
		}
		return nil
	})
}
