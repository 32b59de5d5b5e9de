package runtimecfg

import (
	"errors"

	"github.com/vipctl/vipctl/pkg/dataplane"
	"github.com/vipctl/vipctl/pkg/onnode"
)

// Leave undoes what Reconcile set up in the node's network namespace, for
// a host that stops taking part for good once its keepalived and haproxy
// have stopped (the bootstrap host, after the control-plane nodes took
// the API VIP over): the API redirect, the handover tables, the IPv6
// takeover routes, the VIPs' local routes and ARP settings, the drain.
// A running Local must be stopped first, or it puts the routes back. The
// files stay: they say what ran.
func (n *Node) Leave() error {
	n.redirected = "" // a Reconcile after this writes the redirects again
	return errors.Join(
		n.WithNetnsFd(func(fd int) error { return dataplane.EnsureRedirects(fd, nil) }),
		n.handover.Apply(onnode.Handover{}),
		n.takeover.Apply(onnode.Handover{}),
		dataplane.Undrain(n.Target),
	)
}
