package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/nftables"

	"github.com/vipctl/vipctl/test/clusterlab"
)

// synProbeTable counts, on a node, the SYNs to port 80 that reach
// prerouting after conntrack (priority -150, before kube-proxy's DNAT at
// -100) by what conntrack made of them. A SYN that opens a connection is
// new; the rollback's rare reset by a node's own stack (docs/lab.md) came
// with no conntrack event at all for its SYN, so it was either not
// tracked (invalid, untracked) or taken for a packet of an entry that
// existed already (established, or the reply direction of an entry that
// the node itself began), none of which kube-proxy's DNAT touches.
const synProbeTable = `table inet labsynprobe {
	counter new {}
	counter established {}
	counter related {}
	counter invalid {}
	counter untracked {}
	counter reply {}
	chain pre {
		type filter hook prerouting priority -150; policy accept;
		tcp dport 80 tcp flags & (syn | ack) == syn jump syn
	}
	chain syn {
		ct state new counter name "new"
		ct state established counter name "established"
		ct state related counter name "related"
		ct state invalid counter name "invalid"
		ct state untracked counter name "untracked"
		ct direction reply counter name "reply"
	}
}
`

// synProbe is synProbeTable loaded on every node of a cluster.
type synProbe struct {
	c      *clusterlab.Cluster
	loaded []string
}

// probeSYNs loads synProbeTable on every node; the test's end removes it.
func probeSYNs(t *testing.T, c *clusterlab.Cluster) *synProbe {
	path := filepath.Join(t.TempDir(), "synprobe.nft")
	if err := os.WriteFile(path, []byte(synProbeTable), 0o644); err != nil {
		t.Fatal(err)
	}
	p := &synProbe{c: c}
	for _, n := range c.Nodes {
		if out, err := n.Host.Exec("nft", "-f", path); err != nil {
			t.Logf("%s: the SYN probe was not loaded: %v: %s", n.Name, err, out)
			continue
		}
		p.loaded = append(p.loaded, n.Name)
	}
	t.Cleanup(p.remove)
	return p
}

// counts says, per node, how many SYNs conntrack took each way ("worker-0
// new 812 invalid 1"). Read over netlink: nft lists the whole ruleset
// first, and aborts on the handover rules of the release before
// 2026-12-01 (nftwatch_test.go), which a rollback's nodes run.
func (p *synProbe) counts() string {
	var out []string
	for _, n := range p.c.Nodes {
		var objs []nftables.Obj
		err := n.Host.Do(func() error {
			conn, err := nftables.New()
			if err != nil {
				return err
			}
			objs, err = conn.GetObjects(&nftables.Table{Name: "labsynprobe", Family: nftables.TableFamilyINet})
			return err
		})
		if err != nil {
			out = append(out, fmt.Sprintf("%s: %v", n.Name, err))
			continue
		}
		line := n.Name
		for _, o := range objs {
			if c, ok := o.(*nftables.CounterObj); ok && (c.Packets > 0 || c.Name == "new") {
				line += fmt.Sprintf(" %s %d", c.Name, c.Packets)
			}
		}
		out = append(out, line)
	}
	return strings.Join(out, ", ")
}

// entries lists, per node, the conntrack entries that name one of the
// ports (either direction, any state): the entry a failed dial's SYN was
// taken for, when it is still there.
func (p *synProbe) entries(ports []string) string {
	if len(ports) == 0 {
		return "no port to look for"
	}
	var out []string
	for _, n := range p.c.Nodes {
		b, err := n.Host.Exec("conntrack", "-L", "-p", "tcp")
		if err != nil {
			out = append(out, fmt.Sprintf("%s: %v", n.Name, err))
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			for _, port := range ports {
				if strings.Contains(l, "port="+port+" ") {
					out = append(out, n.Name+": "+strings.TrimSpace(l))
					break
				}
			}
		}
	}
	if len(out) == 0 {
		return "none on any node"
	}
	return strings.Join(out, " | ")
}

// remove deletes the table where it was loaded.
func (p *synProbe) remove() {
	for _, n := range p.c.Nodes {
		for _, name := range p.loaded {
			if name == n.Name {
				_ = n.Host.Do(func() error {
					conn, err := nftables.New()
					if err != nil {
						return err
					}
					conn.DelTable(&nftables.Table{Name: "labsynprobe", Family: nftables.TableFamilyINet})
					return conn.Flush()
				})
			}
		}
	}
	p.loaded = nil
}
