package dataplane

import (
	"encoding/binary"
	"fmt"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/vipctl/vipctl/pkg/host"
	"github.com/vipctl/vipctl/pkg/onnode"
)

// RedirectTable is the nftables table (family inet) holding the API
// redirect. vipctl owns it whole and replaces it in one transaction.
const RedirectTable = "vipctl"

// ApplyRedirects makes the target's API table hold these redirects and
// the internal API's guard (nil: none); the caller says what a node holds
// (a control-plane node: the API's redirects, render.APIRedirects).
func ApplyRedirects(t host.Target, redirects []onnode.PortRedirect, guard *onnode.InternalGuard) error {
	return t.WithNetnsFd(func(fd int) error { return EnsureAPITable(fd, redirects, guard) })
}

// HasRedirects tells whether the target's API table holds redirects (its
// NAT chains), whoever wrote them.
func HasRedirects(t host.Target) (bool, error) {
	var has bool
	err := t.WithNetnsFd(func(fd int) error {
		conn, err := nftConn(fd)
		if err != nil {
			return err
		}
		defer func() { _ = conn.CloseLasting() }()
		chains, err := conn.ListChainsOfTableFamily(nftables.TableFamilyINet)
		if err != nil {
			return fmt.Errorf("nftables: listing chains: %w", err)
		}
		has = slices.ContainsFunc(chains, func(c *nftables.Chain) bool {
			return c.Table.Name == RedirectTable && c.Type == nftables.ChainTypeNAT
		})
		return nil
	})
	return has, err
}

// Accepting tells whether something accepts TCP connections on port on
// the target's loopback (IPv4 or IPv6): haproxy's API port, before the
// redirects send the node's own clients there.
func Accepting(t host.Target, port uint16) bool {
	accepting := false
	_ = t.InNetns(func() error {
		for _, addr := range []string{"127.0.0.1", "::1"} {
			c, err := net.DialTimeout("tcp", net.JoinHostPort(addr, strconv.Itoa(int(port))), acceptTimeout)
			if err == nil {
				_ = c.Close()
				accepting = true
				return nil
			}
		}
		return nil
	})
	return accepting
}

// acceptTimeout bounds Accepting's connect on loopback, where a closed
// port refuses at once.
const acceptTimeout = 500 * time.Millisecond

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
func EnsureRedirects(netnsFd int, redirects []onnode.PortRedirect) error {
	return EnsureAPITable(netnsFd, redirects, nil)
}

// EnsureAPITable makes table inet vipctl hold exactly these redirects and
// guard (nil: none), in the network namespace of netnsFd (-1: the
// current one): for the redirects a prerouting chain for connections from
// other hosts and an output chain for the node's own, for the guard an
// input chain (addGuard). The table is replaced atomically; with neither
// it is removed.
func EnsureAPITable(netnsFd int, redirects []onnode.PortRedirect, guard *onnode.InternalGuard) error {
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
func redirectExprs(r onnode.PortRedirect) []expr.Any {
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
