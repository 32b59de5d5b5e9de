package sidecar

import (
	"github.com/vipctl/vipctl/pkg/runtimecfg"
)

// followFromBoot gives LocalVIPs, before it starts, the handover data of
// the view the node booted from (runtimecfg.BootInput: the last-good
// view, or the bootstrap node list), which --once rendered keepalived.conf
// from; the first sync with the cluster replaces it. Until then LocalVIPs
// had none, so the Service addresses of a pool with announce: sidecar
// stayed off the interface while keepalived held their anchors: after a
// cold start of the whole cluster until the API answered and the
// informers' backoff let them list it again (46 s in the lab with the
// API back after 25 s, BenchmarkAnnounce's cold-start-api-down), and
// after a restart of the sidecar alone until its caches synced. A pod
// comes back with what it held (design: node lifecycle invariants), the
// sidecar's addresses too.
func (s *Sidecar) followFromBoot() {
	in, err := runtimecfg.BootInput(s.o.OnceOptions, s.static)
	if err != nil {
		s.log.Info("nothing on disk to follow anchors from until the first sync", "err", err)
		return
	}
	d, err := s.node.Desired(in)
	if err != nil {
		s.log.Warn("the view on disk does not render; following anchors from the first sync", "from", in.From, "err", err)
		return
	}
	s.node.Local.SetHandover(d.Handover)
}
