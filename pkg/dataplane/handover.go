package dataplane

import (
	"bytes"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/vipctl/vipctl/pkg/host"
	"github.com/vipctl/vipctl/pkg/onnode"
)

// A planned handover moves a VIP while clients have connections open to
// the old holder. Once a client's ARP entry follows the new holder's
// gratuitous ARP, the next segment of such a connection reaches the new
// holder, which has no socket for it and would answer with a reset. The
// handover table stops that, on the node taking a VIP over:
//
//   - It learns whom it takes the VIP from out of VRRP itself. A master
//     advertising a priority below this node's own is one this node is
//     about to take the VIP from in a planned way: the master drained
//     (priority 1, render's drainRef, below every undrained node), or
//     this node came back and will preempt it. Each such advert from a
//     known peer records "VRID is held by PEER" in the old_masters map for
//     HandoverGrace; the old master stops advertising once it is backup,
//     so the record lapses HandoverGrace after the takeover. A master that
//     fails (link lost, keepalived killed) was advertising more than this
//     node, so nothing is learned: its clients still get resets at once
//     and reconnect.
//   - A TCP segment to one of this node's VIPs that is not a SYN and
//     belongs to no connection conntrack has seen answered (a segment of
//     a connection accepted elsewhere) is copied to the old master of the
//     VIP's instance and dropped here. The old master (see LocalVIPs)
//     still accepts for the VIP through a local route and answers from it.
//
// The table is inert on a node that holds none of the VIPs (no VIP
// traffic reaches it) and for every VIP whose instance has no old master
// on record. Segments sent on keep their addresses: only the next hop
// changes, so nothing about the connection is rewritten.

// HandoverTable is the nftables table (families ip and ip6) vipctl owns
// for handovers.
const HandoverTable = "vipctl-handover"

// HandoverGrace is how long after a drained peer's last advert its
// clients' connections are still sent on to it: requests in flight at the
// handover finish; a connection older than that (a watch) is reset after
// it and reconnects to the new holder.
const HandoverGrace = 10 * time.Second

const (
	setOldMasters = "old_masters"
	setVIPs       = "vips"
	setPeers      = "peers"
	chainName     = "prerouting"
	ipprotoVRRP   = 112
	// dynsetOpDelete is NFT_DYNSET_OP_DELETE (Linux 5.19), which
	// x/sys/unix does not name.
	dynsetOpDelete = 2
)

// ApplyHandover installs this node's handover tables in the target's
// network namespace, reading what is there to change only the difference.
func ApplyHandover(t host.Target, h onnode.Handover) error {
	return NewHandoverWriter(t, HandoverGrace).Apply(h)
}

// HandoverWriter writes one node's handover tables again and again, as the
// sidecar does after every apply. It remembers what it wrote, so that a
// rewrite sends the difference without reading thousands of elements back
// from the kernel each time (at 5000 Service addresses that read is most
// of the cost); after a failure, or when a table is missing, it reads.
type HandoverWriter struct {
	t     host.Target
	grace time.Duration
	// wrote is each family's sets as last written, by family and set
	// name; a family not in it is read from the kernel.
	wrote map[string]map[string]map[netip.Addr][]byte
	// rules is each family's rules as last written (ruleKey): while they
	// stay the same, a rewrite changes set elements alone, and nothing
	// at all when those stay the same too (a sync runs for every Service
	// added, on every node). At least every LocalResync they are
	// written again, which also finds a table someone else removed.
	rules   map[string]string
	rulesAt time.Time
}

// NewHandoverWriter writes the target's tables with records lasting grace.
func NewHandoverWriter(t host.Target, grace time.Duration) *HandoverWriter {
	return &HandoverWriter{t: t, grace: grace, wrote: map[string]map[string]map[netip.Addr][]byte{}, rules: map[string]string{}}
}

// Apply makes the tables match h. What the tables learned (the old_masters
// map) survives: a config change during a handover does not forget the
// old master. The rules and the first elements change in one transaction;
// set elements change as a difference, in transactions of at most
// elementsPerFlush, since a netlink message cannot carry thousands. An h
// without instances of a family removes that family's table.
func (w *HandoverWriter) Apply(h onnode.Handover) error {
	return w.t.WithNetnsFd(func(fd int) error {
		conn, err := nftConn(fd)
		if err != nil {
			return err
		}
		defer func() { _ = conn.CloseLasting() }()
		ifindex := 0
		if len(h.Instances) > 0 {
			if ifindex, err = linkIndex(fd, h.Interface); err != nil {
				return err
			}
		}
		fresh := time.Since(w.rulesAt) < LocalResync
		if !fresh {
			w.rulesAt = time.Now()
		}
		for _, f := range handoverFamilies {
			rules := f.ruleKey(h, ifindex, w.grace)
			wrote, err := f.ensure(conn, h, ifindex, w.grace, w.wrote[f.name], fresh && rules == w.rules[f.name])
			if err != nil {
				delete(w.wrote, f.name)
				delete(w.rules, f.name)
				return fmt.Errorf("nftables: table %s %s: %w", f.name, HandoverTable, err)
			}
			w.wrote[f.name], w.rules[f.name] = wrote, rules
		}
		return nil
	})
}

// handoverFamily is what differs between the ip and ip6 tables.
type handoverFamily struct {
	name     string
	family   nftables.TableFamily
	addrType nftables.SetDatatype
	is4      bool
	// saddr and daddr are the offsets of the addresses in the network
	// header, proto that of its protocol (IPv4) or next header (IPv6).
	saddr, daddr, proto uint32
}

var handoverFamilies = []handoverFamily{
	{"ip", nftables.TableFamilyIPv4, nftables.TypeIPAddr, true, 12, 16, 9},
	{"ip6", nftables.TableFamilyIPv6, nftables.TypeIP6Addr, false, 8, 24, 6},
}

func linkIndex(netnsFd int, name string) (int, error) {
	var link netlink.Link
	var err error
	if netnsFd < 0 {
		link, err = netlink.LinkByName(name)
	} else {
		var nh *netlink.Handle
		nh, err = netlink.NewHandleAt(netns.NsHandle(netnsFd))
		if err != nil {
			return 0, fmt.Errorf("netlink: %w", err)
		}
		defer nh.Close()
		link, err = nh.LinkByName(name)
	}
	if err != nil {
		return 0, fmt.Errorf("VRRP interface %s: %w", name, err)
	}
	return link.Attrs().Index, nil
}

// elementsPerFlush keeps each set-element message well under netlink's
// 64 KiB attribute limit (an IPv6 map element takes about 40 bytes).
const elementsPerFlush = 500

// ruleKey is what one family's rules are written from (ensure): each
// instance's VRID and priority, the interface and the grace.
func (f handoverFamily) ruleKey(h onnode.Handover, ifindex int, grace time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d %s", ifindex, grace)
	learned := map[uint8]bool{}
	for _, in := range h.Instances {
		if (in.Family == 4) != f.is4 || learned[in.VRID] {
			continue
		}
		learned[in.VRID] = true
		fmt.Fprintf(&b, " %d:%d", in.VRID, in.Priority)
	}
	return b.String()
}

// ensure writes one family's table and returns its sets' contents. known
// is what the last call returned (nil: read what the table holds);
// sameRules says the rules were last written from the same ruleKey, so
// that with known only set elements change.
func (f handoverFamily) ensure(conn *nftables.Conn, h onnode.Handover, ifindex int, grace time.Duration, known map[string]map[netip.Addr][]byte, sameRules bool) (map[string]map[netip.Addr][]byte, error) {
	vips, peers := map[netip.Addr][]byte{}, map[netip.Addr][]byte{}
	for _, in := range h.Instances {
		if (in.Family == 4) != f.is4 {
			continue
		}
		for _, v := range in.VIPs {
			vips[v] = vridKey(in.VRID)
		}
		for _, p := range in.Peers {
			peers[p] = nil
		}
	}
	wrote := map[string]map[netip.Addr][]byte{setVIPs: vips, setPeers: peers}
	table := &nftables.Table{Family: f.family, Name: HandoverTable}
	sets := map[string]*nftables.Set{
		setOldMasters: {Table: table, Name: setOldMasters, IsMap: true, Dynamic: true, HasTimeout: true, Timeout: grace,
			KeyType: nftables.TypeMark, DataType: f.addrType},
		setVIPs:  {Table: table, Name: setVIPs, IsMap: true, KeyType: f.addrType, DataType: nftables.TypeMark},
		setPeers: {Table: table, Name: setPeers, KeyType: f.addrType},
	}
	if known != nil && sameRules && len(vips) > 0 {
		// The table is as last written but for the elements.
		var changes []elementChange
		for name, want := range wrote {
			changes = append(changes, diffElements(sets[name], known[name], want)...)
		}
		return wrote, flushChanges(conn, changes)
	}
	tables, err := conn.ListTablesOfFamily(f.family)
	if err != nil {
		return nil, fmt.Errorf("listing tables: %w", err)
	}
	exists := false
	for _, t := range tables {
		exists = exists || t.Name == HandoverTable
	}
	if len(vips) == 0 {
		if exists {
			conn.DelTable(table)
		}
		return nil, conn.Flush()
	}
	chain := &nftables.Chain{Name: chainName, Table: table, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityMangle}
	var changes []elementChange
	if exists {
		conn.FlushChain(chain)
		for name, want := range wrote {
			have := known[name]
			if known == nil {
				elems, err := conn.GetSetElements(sets[name])
				if err != nil {
					return nil, fmt.Errorf("reading set %s: %w", name, err)
				}
				have = elementMap(elems)
			}
			changes = append(changes, diffElements(sets[name], have, want)...)
		}
	} else {
		conn.AddTable(table)
		for _, name := range []string{setOldMasters, setVIPs, setPeers} {
			if err := conn.AddSet(sets[name], nil); err != nil {
				return nil, fmt.Errorf("set %s: %w", name, err)
			}
		}
		conn.AddChain(chain)
		changes = append(changes, diffElements(sets[setVIPs], nil, vips)...)
		changes = append(changes, diffElements(sets[setPeers], nil, peers)...)
	}
	learned := map[uint8]bool{}
	for _, in := range h.Instances {
		if (in.Family == 4) != f.is4 || learned[in.VRID] {
			continue
		}
		learned[in.VRID] = true
		conn.AddRule(&nftables.Rule{Table: table, Chain: chain, Exprs: f.learnExprs(sets, in, grace, false)})
		if !f.is4 {
			conn.AddRule(&nftables.Rule{Table: table, Chain: chain, Exprs: f.learnExprs(sets, in, grace, true)})
		}
	}
	for _, vrid := range slices.Sorted(maps.Keys(learned)) {
		conn.AddRule(&nftables.Rule{Table: table, Chain: chain, Exprs: f.handOnExprs(sets, ifindex, vrid)})
	}
	if err := flushChanges(conn, changes); err != nil {
		return nil, err
	}
	return wrote, conn.Flush()
}

// flushChanges sends set element changes, deletions first (a VIP that
// moved to another instance is deleted and added again with its new
// VRID), in transactions of at most elementsPerFlush; the first also
// carries whatever conn has queued.
func flushChanges(conn *nftables.Conn, changes []elementChange) error {
	slices.SortStableFunc(changes, func(a, b elementChange) int {
		if c := cmpBool(b.del, a.del); c != 0 {
			return c
		}
		return strings.Compare(a.set.Name, b.set.Name)
	})
	for len(changes) > 0 {
		n := min(len(changes), elementsPerFlush)
		// One message per run of the same set and operation.
		for i := 0; i < n; {
			j := i
			var elems []nftables.SetElement
			for ; j < n && changes[j].set == changes[i].set && changes[j].del == changes[i].del; j++ {
				elems = append(elems, changes[j].element())
			}
			var err error
			if changes[i].del {
				err = conn.SetDeleteElements(changes[i].set, elems)
			} else {
				err = conn.SetAddElements(changes[i].set, elems)
			}
			if err != nil {
				return err
			}
			i = j
		}
		if err := conn.Flush(); err != nil {
			return err
		}
		changes = changes[n:]
	}
	return nil
}

// elementMap is a set's elements by address.
func elementMap(elems []nftables.SetElement) map[netip.Addr][]byte {
	out := make(map[netip.Addr][]byte, len(elems))
	for _, e := range elems {
		if a, ok := netip.AddrFromSlice(e.Key); ok {
			out[a] = e.Val
		}
	}
	return out
}

// elementChange adds or deletes one element of a set. It holds the
// address, not the nftables.SetElement (128 bytes) sent for it, which is
// made one batch at a time: the first write of a node's table at 5000
// Services is 5000 changes at once, when the sidecar's memory peaks
// (issue 51).
type elementChange struct {
	set  *nftables.Set
	addr netip.Addr
	val  []byte
	del  bool
}

func (c elementChange) element() nftables.SetElement {
	if c.del {
		return nftables.SetElement{Key: c.addr.AsSlice()}
	}
	return nftables.SetElement{Key: c.addr.AsSlice(), Val: c.val}
}

// diffElements turns a set holding have into one holding want (a map's
// values in both; nil values for a plain set).
func diffElements(set *nftables.Set, have, want map[netip.Addr][]byte) []elementChange {
	var out []elementChange
	if len(have) == 0 {
		out = make([]elementChange, 0, len(want))
	}
	for a, v := range have {
		if w, keep := want[a]; keep && (!set.IsMap || bytes.Equal(v, w)) {
			continue
		}
		out = append(out, elementChange{set: set, addr: a, del: true})
	}
	for a, v := range want {
		if h, had := have[a]; !had || (set.IsMap && !bytes.Equal(v, h)) {
			out = append(out, elementChange{set: set, addr: a, val: v})
		}
	}
	return out
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// vridKey is a VRID as the 32-bit key both rules load: the ID in the
// first byte (a one-byte payload load zeroes the rest of the register).
func vridKey(id uint8) []byte { return []byte{id, 0, 0, 0} }

// learnExprs: an advert of the instance from a peer with a priority below
// this node's records vrid -> peer in the old_masters map. A peer is an
// address of the peers set or, with linkLocal (IPv6), any link-local
// address: IPv6 VRRP in multicast mode advertises from one, and the
// segments sent on to it leave through the VRRP interface.
func (f handoverFamily) learnExprs(sets map[string]*nftables.Set, in onnode.HandoverInstance, grace time.Duration, linkLocal bool) []expr.Any {
	addrLen := uint32(f.addrType.Bytes)
	fromPeer := []expr.Any{&expr.Lookup{SourceRegister: 2, SetName: setPeers, SetID: sets[setPeers].ID}}
	if linkLocal {
		fe80 := netip.MustParseAddr("fe80::").As16()
		mask := netip.MustParseAddr("ffc0::").As16()
		fromPeer = []expr.Any{
			&expr.Bitwise{SourceRegister: 2, DestRegister: 3, Len: 16, Mask: mask[:], Xor: make([]byte, 16)},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 3, Data: fe80[:]},
		}
	}
	return append(append([]expr.Any{
		// `ip protocol vrrp` (`ip6 nexthdr vrrp`: keepalived's adverts
		// carry no extension header), not `meta l4proto vrrp`: after
		// the latter nft 1.0.6 aborts on listing a raw transport header
		// match it cannot place (`nft list ruleset` on the node, `nft
		// monitor`), while the kernel matches both alike.
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: f.proto, Len: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{ipprotoVRRP}},
		// Type 1 (advertisement) in the low nibble of the first byte.
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 1, Mask: []byte{0x0f}, Xor: []byte{0}},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{1}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 1, Len: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{in.VRID}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 1},
		&expr.Cmp{Op: expr.CmpOpLt, Register: 1, Data: []byte{byte(min(max(in.Priority, 0), 255))}},
		&expr.Payload{DestRegister: 2, Base: expr.PayloadBaseNetworkHeader, Offset: f.saddr, Len: addrLen},
	}, fromPeer...), []expr.Any{
		// The VRID as the map's 4-byte key (`@th,8,32 & 0xff000000`,
		// the bytes the vips map holds): a 1-byte key in a 4-byte map
		// is what the kernel sees alike but nft 1.0.6 aborts on listing
		// (netlink_parse_concat_expr).
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 1, Len: 4},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: []byte{0xff, 0, 0, 0}, Xor: make([]byte, 4)},
		// Delete, then add: an update would only refresh the timeout of
		// an entry naming an earlier old master of the same instance.
		&expr.Dynset{SrcRegKey: 1, SrcRegData: 2, SetName: setOldMasters, SetID: sets[setOldMasters].ID,
			Operation: dynsetOpDelete},
		&expr.Dynset{SrcRegKey: 1, SrcRegData: 2, SetName: setOldMasters, SetID: sets[setOldMasters].ID,
			Operation: uint32(unix.NFT_DYNSET_OP_ADD), Timeout: grace},
	}...)
}

// handOnExprs: a TCP segment other than a SYN, to a VIP of instance vrid
// with an old master on record, of a connection conntrack has not seen
// answered here, is copied to the old master (next hop only) and dropped.
// One rule per instance, the VRID a constant (`ip daddr map @vips ==
// VRID ... dup to VRID map @old_masters`): nft 1.0.6 aborts on listing
// one rule that takes the old_masters key from the vips lookup itself.
func (f handoverFamily) handOnExprs(sets map[string]*nftables.Set, ifindex int, vrid uint8) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 13, Len: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 1, Mask: []byte{0x02}, Xor: []byte{0}},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{0}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: f.daddr, Len: uint32(f.addrType.Bytes)},
		&expr.Lookup{SourceRegister: 1, DestRegister: 1, IsDestRegSet: true, SetName: setVIPs, SetID: sets[setVIPs].ID},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: vridKey(vrid)},
		&expr.Ct{Key: expr.CtKeySTATE, Register: 2},
		&expr.Bitwise{SourceRegister: 2, DestRegister: 2, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(expr.CtStateBitESTABLISHED | expr.CtStateBitRELATED), Xor: make([]byte, 4)},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 2, Data: make([]byte, 4)},
		&expr.Immediate{Register: 1, Data: vridKey(vrid)},
		&expr.Lookup{SourceRegister: 1, DestRegister: 2, IsDestRegSet: true, SetName: setOldMasters, SetID: sets[setOldMasters].ID},
		&expr.Immediate{Register: 3, Data: binaryutil.NativeEndian.PutUint32(uint32(ifindex))},
		&expr.Dup{RegAddr: 2, RegDev: 3, IsRegDevSet: true},
		&expr.Counter{},
		&expr.Verdict{Kind: expr.VerdictDrop},
	}
}
