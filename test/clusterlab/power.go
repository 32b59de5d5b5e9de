package clusterlab

import (
	"math/rand/v2"
	"testing"
	"time"
)

// PowerCut ends every node at once, as a power cut does: every process
// of each node killed, what it keeps on disk (etcd's data, containerd's
// images, the MachineConfig's files) left as it was.
func (c *Cluster) PowerCut() {
	done := make(chan struct{}, len(c.Nodes))
	for _, n := range c.Nodes {
		go func() { n.PowerOff(); done <- struct{}{} }()
	}
	for range c.Nodes {
		<-done
	}
}

// PowerOn boots every node, one after the other in a random order (each
// boot takes a few seconds, so they come up spread out as machines do),
// and returns the order and when the first kubelet started.
func (c *Cluster) PowerOn(t testing.TB) ([]string, time.Time) {
	t.Helper()
	var names []string
	var first time.Time
	for _, i := range rand.Perm(len(c.Nodes)) {
		n := c.Nodes[i]
		c.bootNode(t, n)
		if first.IsZero() {
			first = time.Now()
		}
		names = append(names, n.Name)
	}
	return names, first
}

// bootNode boots a node PowerOff ended: a fresh network namespace (what
// the node's own configuration sets up at boot: its addresses, routes and
// the MachineConfig's kernel settings; nothing vipctl, kube-proxy or the
// CNI made survives), then containerd and the kubelet with the files on
// its disk.
func (c *Cluster) bootNode(t testing.TB, n *Node) {
	t.Helper()
	n.Host.Reboot()
	c.applySysctls(t, n.Host, n.Spec.Role)
	n.Boot(t)
}
