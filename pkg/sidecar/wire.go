package sidecar

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vipctl/vipctl/pkg/preflight"
	"github.com/vipctl/vipctl/pkg/render"
)

// What the wire says (issue 54): the node's books (keepalived's state,
// the Node annotation) can look healthy while the segment does not: an
// address answered by two hosts, or by nobody while a node holds it. The
// sidecar asks, on its VRRP interface, who answers ARP (IPv4) and
// neighbour solicitations (IPv6) for each VIP of its instances and
// exports how many link-layer addresses do, itself included when it has
// the address (vipctl_wire_vip_answerers); the alerts compare the
// nodes' views.
const (
	// DefaultWireInterval is how long the sidecar rests between two
	// passes over its VIPs.
	DefaultWireInterval = 10 * time.Second
	// DefaultWireRate bounds the questions a node sends, per second on
	// average: 5000 VIPs take 50 s a pass, and the segment carries at
	// most this many requests per node (and as many answers).
	DefaultWireRate = 100
	// wireChunk is how many addresses one question round covers: the
	// burst a node sends at once.
	wireChunk = 32
	// wireAnswerWait is how long answers are awaited after a round:
	// longer than a loaded node takes to answer on one segment.
	wireAnswerWait = 300 * time.Millisecond
	// wireReasks is how many times more an address nobody answered is
	// asked in the same pass: a lost request or answer must not read as
	// an address nobody serves.
	wireReasks = 2
)

// wireTargets are the addresses the node asks for, on its VRRP
// interface: the VIPs of its instances that have a peer (a lonely
// instance's VIP has no second view to compare with).
type wireTargets struct {
	iface string
	addrs []netip.Addr
}

// rememberWire takes the node's instances from a render.
func (s *Sidecar) rememberWire(h render.Handover) {
	var addrs []netip.Addr
	for _, in := range h.Instances {
		addrs = append(addrs, in.VIPs...)
	}
	slices.SortFunc(addrs, netip.Addr.Compare)
	addrs = slices.Compact(addrs)
	s.mu.Lock()
	s.wire = wireTargets{iface: h.Interface, addrs: addrs}
	s.mu.Unlock()
	s.m.Wire.Answerers.keep(addrs)
}

// wireLoop asks the wire every WireInterval (after the pass before has
// ended) until ctx ends; a WireInterval below zero asks never.
func (s *Sidecar) wireLoop(ctx context.Context) {
	if s.o.WireInterval < 0 {
		return
	}
	var said string
	for {
		s.mu.Lock()
		tg := s.wire
		s.mu.Unlock()
		started := time.Now()
		if err := s.askWire(ctx, tg); err != nil && ctx.Err() == nil {
			s.m.Failures.WithLabelValues("wire").Inc()
			// Once per cause, not every pass: an interface that is
			// gone stays so for a while.
			if err.Error() != said {
				s.log.Error("cannot ask who answers for the VIPs", "interface", tg.iface, "err", err)
				said = err.Error()
			}
		} else if err == nil {
			said = ""
			s.m.Wire.PassSeconds.Set(time.Since(started).Seconds())
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(s.o.WireInterval):
		}
	}
}

// askWire makes one pass over tg's addresses, wireChunk at a time, no
// faster than WireRate questions a second on average.
func (s *Sidecar) askWire(ctx context.Context, tg wireTargets) error {
	if tg.iface == "" || len(tg.addrs) == 0 {
		return nil
	}
	local, err := s.o.Addresses()
	if err != nil {
		return err
	}
	for chunk := range slices.Chunk(tg.addrs, wireChunk) {
		start := time.Now()
		heard, asked, err := s.askChunk(ctx, tg.iface, chunk)
		s.m.Wire.Questions.Add(float64(asked))
		if err != nil {
			return err
		}
		for _, a := range chunk {
			n := len(heard[a])
			if slices.Contains(local, a) {
				n++
			}
			s.m.Wire.Answerers.set(a, n)
		}
		pace := time.Duration(float64(asked) / float64(s.o.WireRate) * float64(time.Second))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Until(start.Add(pace))):
		}
	}
	return nil
}

// askChunk asks once for each address of chunk, then up to wireReasks
// times more for those nobody answered, and returns who answered and how
// many questions went out.
func (s *Sidecar) askChunk(ctx context.Context, iface string, chunk []netip.Addr) (map[netip.Addr][]net.HardwareAddr, int, error) {
	heard := map[netip.Addr][]net.HardwareAddr{}
	ask, asked := chunk, 0
	for round := 0; round <= wireReasks && len(ask) > 0; round++ {
		var got map[netip.Addr][]net.HardwareAddr
		// The sockets belong to the namespace they are opened in (the
		// host's on a real node, the node's own in a lab).
		err := s.o.InNetns(func() error {
			ifi, err := net.InterfaceByName(iface)
			if err != nil {
				return err
			}
			got, err = preflight.AskRounds(ctx, ifi, ask, 1, wireAnswerWait)
			return err
		})
		asked += len(ask)
		if err != nil {
			return nil, asked, err
		}
		var again []netip.Addr
		for _, a := range ask {
			if len(got[a]) > 0 {
				heard[a] = got[a]
			} else {
				again = append(again, a)
			}
		}
		ask = again
	}
	return heard, asked, nil
}

// WireMetrics describe what the node's questions on the wire found.
type WireMetrics struct {
	Answerers   *AnswerCollector
	Questions   prometheus.Counter
	PassSeconds prometheus.Gauge
}

// AnswerCollector is vipctl_wire_vip_answerers: one series per VIP the
// node asks for, made at each scrape (as HeldCollector: no labelled
// series object per VIP kept between scrapes).
type AnswerCollector struct {
	desc *prometheus.Desc
	mu   sync.Mutex
	n    map[netip.Addr]int
	// asked are the addresses asked for as of the last render, sorted: a
	// pass that began before it sets none of the others.
	asked []netip.Addr
}

func newAnswerCollector(name string) *AnswerCollector {
	return &AnswerCollector{n: map[netip.Addr]int{}, desc: prometheus.NewDesc(name,
		"Link-layer addresses that answer ARP (IPv4) or neighbour solicitations (IPv6) for the VIP as this node last asked on its VRRP interface, this node included while it has the VIP: 1 is healthy; 0 while a node holds the VIP, or 2 and more, are faults (VipctlVIPUnanswered, VipctlVIPAnsweredTwice).",
		[]string{"vip"}, nil)}
}

// keep drops the series of the addresses no longer asked for.
func (c *AnswerCollector) keep(addrs []netip.Addr) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.asked = addrs
	for a := range c.n {
		if _, found := slices.BinarySearchFunc(addrs, a, netip.Addr.Compare); !found {
			delete(c.n, a)
		}
	}
}

func (c *AnswerCollector) set(a netip.Addr, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, found := slices.BinarySearchFunc(c.asked, a, netip.Addr.Compare); found {
		c.n[a] = n
	}
}

// Get is what the last question for a found; ok is false before it was
// asked for.
func (c *AnswerCollector) Get(a netip.Addr) (n int, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, ok = c.n[a]
	return n, ok
}

// Describe is prometheus.Collector's.
func (c *AnswerCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect is prometheus.Collector's.
func (c *AnswerCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for a, n := range c.n {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), a.String())
	}
}
