package dataplane

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/host"
	"github.com/vipctl/vipctl/pkg/render"
)

// RedirectTable is the nftables table (family inet) holding the API
// redirect. vipctl owns it whole and replaces it in one transaction.
const RedirectTable = "vipctl"

// PortRedirect sends TCP connections to VIP:From on to local port To.
type PortRedirect struct {
	VIP      netip.Addr
	From, To uint16
}

// APIRedirects lists the redirects of a control-plane node: kube-apiserver
// holds the API port on every address, so connections to the API VIP's
// port must be turned to haproxy's port, or the holder's own apiserver
// would answer alone (and a dead one would fail the VIP). The same for
// api-int's port when haproxy fronts it; api-int's own VIPs serve both
// as well.
func APIRedirects(c *v1alpha1.ClusterVIPs) []PortRedirect {
	var out []PortRedirect
	for _, v := range slices.Concat(c.Spec.API.VIPs, c.Spec.API.InternalVIPs) {
		vip := netip.MustParseAddr(v)
		out = append(out, PortRedirect{VIP: vip, From: uint16(c.Spec.API.Port), To: uint16(c.Spec.API.LoadBalancerPort)})
		if c.Spec.API.InternalPort != 0 {
			out = append(out, PortRedirect{VIP: vip, From: uint16(c.Spec.API.InternalPort), To: uint16(c.Spec.API.InternalLoadBalancerPort)})
		}
	}
	return out
}

// ApplyRedirects installs the API redirects, and the internal API's guard
// when there is one (nil: none), on a control-plane node (the one whose
// files include haproxy.cfg) in the target's namespace.
func ApplyRedirects(t host.Target, c *v1alpha1.ClusterVIPs, files []render.File, guard *render.InternalGuard) error {
	if !slices.ContainsFunc(files, func(f render.File) bool { return f.Path == render.HaproxyConfPath }) {
		return nil
	}
	return t.WithNetnsFd(func(fd int) error { return EnsureAPITable(fd, APIRedirects(c), guard) })
}

// nftConn opens an nftables connection in the network namespace of
// netnsFd (-1: the current one).
func nftConn(netnsFd int) (*nftables.Conn, error) {
	var opts []nftables.ConnOption
	if netnsFd >= 0 {
		opts = append(opts, nftables.WithNetNSFd(netnsFd))
	}
	conn, err := nftables.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("nftables: %w", err)
	}
	return conn, nil
}

// EnsureRedirects makes table inet vipctl hold exactly these redirects
// (EnsureAPITable without a guard); nil removes the table.
func EnsureRedirects(netnsFd int, redirects []PortRedirect) error {
	return EnsureAPITable(netnsFd, redirects, nil)
}

// EnsureAPITable makes table inet vipctl hold exactly these redirects and
// guard (nil: none), in the network namespace of netnsFd (-1: the
// current one): for the redirects a prerouting chain for connections from
// other hosts and an output chain for the node's own, for the guard an
// input chain (addGuard). The table is replaced atomically; with neither
// it is removed.
func EnsureAPITable(netnsFd int, redirects []PortRedirect, guard *render.InternalGuard) error {
	conn, err := nftConn(netnsFd)
	if err != nil {
		return err
	}
	defer func() { _ = conn.CloseLasting() }()
	tables, err := conn.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		return fmt.Errorf("nftables: listing tables: %w", err)
	}
	table := &nftables.Table{Family: nftables.TableFamilyINet, Name: RedirectTable}
	for _, t := range tables {
		if t.Name == RedirectTable {
			conn.DelTable(table)
		}
	}
	if len(redirects) > 0 || guard != nil {
		conn.AddTable(table)
		for _, hook := range []struct {
			name string
			num  *nftables.ChainHook
		}{{"prerouting", nftables.ChainHookPrerouting}, {"output", nftables.ChainHookOutput}} {
			chain := conn.AddChain(&nftables.Chain{Name: hook.name, Table: table, Type: nftables.ChainTypeNAT,
				Hooknum: hook.num, Priority: nftables.ChainPriorityNATDest})
			for _, r := range redirects {
				conn.AddRule(&nftables.Rule{Table: table, Chain: chain, Exprs: redirectExprs(r)})
			}
		}
		if guard != nil {
			if err := addGuard(conn, table, guard); err != nil {
				return fmt.Errorf("nftables: the internal API's guard: %w", err)
			}
		}
	}
	if err := conn.Flush(); err != nil {
		return fmt.Errorf("nftables: replacing table inet %s: %w", RedirectTable, err)
	}
	return nil
}

// redirectExprs is `ip[6] daddr VIP tcp dport From redirect to :To`.
func redirectExprs(r PortRedirect) []expr.Any {
	proto, offset := byte(unix.NFPROTO_IPV4), uint32(16)
	if r.VIP.Is6() {
		proto, offset = unix.NFPROTO_IPV6, 24
	}
	addr := r.VIP.AsSlice()
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{proto}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: uint32(len(addr))},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: addr},
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binary.BigEndian.AppendUint16(nil, r.From)},
		&expr.Immediate{Register: 1, Data: binary.BigEndian.AppendUint16(nil, r.To)},
		&expr.Redir{RegisterProtoMin: 1},
	}
}
