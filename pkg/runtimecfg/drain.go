package runtimecfg

import (
	"github.com/vipctl/vipctl/pkg/dataplane"
	"github.com/vipctl/vipctl/pkg/onnode"
)

// Drain starts a planned handover on the node (dataplane.Drain: the VIPs
// it holds are kept local, then the drain file drops every instance's
// priority to 1) and has Local follow at once. The sidecar (the Node's
// drain annotation), the bootstrap host's yield and the lab all drain
// through it.
func (n *Node) Drain(h onnode.Handover) error {
	if err := dataplane.Drain(n.Target, h); err != nil {
		return err
	}
	n.kickLocal()
	return nil
}

// Undrain ends a drain (dataplane.Undrain) and has Local let go at once
// of the VIPs it kept local since.
func (n *Node) Undrain() error {
	if err := dataplane.Undrain(n.Target); err != nil {
		return err
	}
	n.kickLocal()
	return nil
}

func (n *Node) kickLocal() {
	if n.Local != nil {
		n.Local.Kick()
	}
}
