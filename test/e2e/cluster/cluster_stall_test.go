package cluster

import (
	"net"
	"testing"
	"time"

	"github.com/vipctl/vipctl/test/clusterlab"
	"github.com/vipctl/vipctl/test/lab"
)

// labStallsAllowed is how many failed requests per address a roll may
// blame on the lab (stallWatch) before they fail the test anyway.
const labStallsAllowed = 3

// stallWatch asks every control-plane node's kube-apiserver at its own
// address, never through a VIP, through a roll: no vipctl part is on
// that way. When all of them fail at once, the lab itself stalled (two
// cores starved by a node's in-place update: etcd's applies took 1–2 s,
// and every VIP, the API's, the ingress routers' and the Services',
// failed the same two requests in one rehearsal), and a VIP's request
// that failed then is the lab's, not vipctl's. One node's apiserver
// away (its reboot) leaves the others answering: that excuses nothing.
type stallWatch struct {
	t     *testing.T
	urls  []string
	polls []*lab.Poller
}

func watchStalls(t *testing.T, c *clusterlab.Cluster) *stallWatch {
	w := &stallWatch{t: t}
	for _, m := range c.Masters() {
		url := "https://" + net.JoinHostPort(m.Spec.IP4, "6443") + "/version"
		w.urls = append(w.urls, url)
		w.polls = append(w.polls, lab.StartPolling(c.Client, url, rollPollInterval, clusterlab.RequestTimeout, false))
	}
	return w
}

// stop ends the control requests and logs them; a control that never
// answered is broken (it would excuse every failure), which fails t.
func (w *stallWatch) stop() {
	for i, p := range w.polls {
		ok, failed := p.Stop()
		w.t.Logf("control %s (no VIP on the way): %d answered, %d failed", w.urls[i], ok, failed)
		if ok == 0 {
			w.t.Errorf("control %s never answered: the lab's stalls cannot be told", w.urls[i])
		}
	}
}

// at tells whether every control request stream had a request fail that
// overlapped one started at started (each runs up to RequestTimeout).
func (w *stallWatch) at(started time.Time) bool {
	if len(w.polls) == 0 {
		return false
	}
	for _, p := range w.polls {
		overlapped := false
		for _, s := range p.FailedStarts() {
			if d := s.Sub(started); d > -clusterlab.RequestTimeout && d < clusterlab.RequestTimeout {
				overlapped = true
				break
			}
		}
		if !overlapped {
			return false
		}
	}
	return true
}
