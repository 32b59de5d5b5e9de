package sidecar

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/pkg/preflight"
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
// instance's VIP has no second view to compare with), and the peers'
// own addresses, whose answers are the members' link-layer addresses.
type wireTargets struct {
	iface string
	addrs []netip.Addr
	// keys name each VIP's instance, for the Events.
	keys map[netip.Addr]string
	// peers are every instance's peers; peersOf each VIP's instance's.
	peers   []netip.Addr
	peersOf map[netip.Addr][]netip.Addr
	// instances name the instance of each VIP whose instance can step
	// down (heal.go).
	instances map[netip.Addr]string
}

// rememberWire takes the node's instances from a render, after
// rememberVIPs (their keys).
func (s *Sidecar) rememberWire(h onnode.Handover) {
	tg := wireTargets{iface: h.Interface, keys: map[netip.Addr]string{}, peersOf: map[netip.Addr][]netip.Addr{}, instances: map[netip.Addr]string{}}
	for _, in := range h.Instances {
		tg.addrs = append(tg.addrs, in.VIPs...)
		tg.peers = append(tg.peers, in.Peers...)
		for _, a := range in.VIPs {
			tg.peersOf[a] = append(tg.peersOf[a], in.Peers...)
			if in.StepsDown {
				tg.instances[a] = in.Name
			}
		}
	}
	tg.addrs, tg.peers = sortedSet(tg.addrs), sortedSet(tg.peers)
	s.mu.Lock()
	for _, a := range tg.addrs {
		tg.keys[a] = string(s.known[a])
	}
	s.wire = tg
	s.mu.Unlock()
	s.m.Wire.Answerers.keep(tg.addrs)
	s.m.Wire.Strangers.keep(tg.addrs)
}

func sortedSet(addrs []netip.Addr) []netip.Addr {
	slices.SortFunc(addrs, netip.Addr.Compare)
	return slices.Compact(addrs)
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
		var err error
		// Before the first render nothing is asked, nor published.
		if tg.iface != "" {
			var views v1alpha1.WireViews
			var local map[netip.Addr]bool
			views, local, err = s.askWire(ctx, tg)
			if err == nil {
				pctx, cancel := context.WithTimeout(ctx, s.o.StepTimeout)
				err = s.publishWire(pctx, views)
				cancel()
			}
			if err == nil {
				s.heal(tg, local, time.Now(), time.Since(started))
			}
		}
		if err != nil && ctx.Err() == nil {
			s.m.Failures.WithLabelValues("wire").Inc()
			// Once per cause, not every pass: an interface that is
			// gone stays so for a while.
			if err.Error() != said {
				s.log.Error("cannot ask who answers for the VIPs, or publish what was heard", "interface", tg.iface, "err", err)
				said = err.Error()
			}
		} else if err == nil && tg.iface != "" {
			said = ""
			s.m.Wire.PassSeconds.Set(time.Since(started).Seconds())
		}
		select {
		case <-ctx.Done():
			s.unpublishWire()
			return
		case <-time.After(s.o.WireInterval):
		}
	}
}

// unpublishWire removes the Node's findings as the sidecar stops: they
// are a running sidecar's, and the next one to run (an upgrade's, a
// rollback's older release, which writes none) must not inherit them.
// A sidecar killed without the chance leaves them for readers to skip
// once WireViewFresh has passed.
func (s *Sidecar) unpublishWire() {
	if p := &s.wirePub; p.known && len(p.views) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := s.annotate(ctx, v1alpha1.AnnotationNodeWire, nil); err != nil {
			s.log.Warn("could not remove what the wire said from the Node as the sidecar stops", "err", err)
		}
	}
}

// askWire makes one pass over tg's addresses, wireChunk at a time, no
// faster than WireRate questions a second on average, and returns what
// it found where that is not one answer from a member, and the node's
// own addresses as the pass began.
func (s *Sidecar) askWire(ctx context.Context, tg wireTargets) (v1alpha1.WireViews, map[netip.Addr]bool, error) {
	if len(tg.addrs) == 0 {
		return nil, nil, nil
	}
	addrs, err := s.o.Addresses()
	if err != nil {
		return nil, nil, err
	}
	// A set: a holder of thousands of Service addresses looks each VIP
	// up in them.
	local := make(map[netip.Addr]bool, len(addrs))
	for _, a := range addrs {
		local[a.Unmap()] = true
	}
	members, err := s.memberMACs(ctx, tg)
	if err != nil {
		return nil, nil, err
	}
	var views v1alpha1.WireViews
	for chunk := range slices.Chunk(tg.addrs, wireChunk) {
		start := time.Now()
		heard, asked, err := s.askChunk(ctx, tg.iface, chunk)
		s.m.Wire.Questions.Add(float64(asked))
		if err != nil {
			return nil, nil, err
		}
		for _, a := range chunk {
			n := len(heard[a])
			if local[a] {
				n++
			}
			s.m.Wire.Answerers.set(a, n)
			strangers := members.strangers(heard[a], tg.peersOf[a])
			s.m.Wire.Strangers.set(a, len(strangers))
			for _, mac := range strangers {
				s.strangerAnswers(tg, a, mac, members)
			}
			if n != 1 || len(strangers) > 0 {
				v := v1alpha1.WireView{Address: a.String(), Answers: n, At: time.Now().UTC().Truncate(time.Second)}
				for _, mac := range strangers {
					v.Strangers = append(v.Strangers, mac.String())
				}
				views = append(views, v)
			}
		}
		pace := time.Duration(float64(asked) / float64(s.o.WireRate) * float64(time.Second))
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-time.After(time.Until(start.Add(pace))):
		}
	}
	return views, local, nil
}

// wireViewsMax caps the views a Node's annotation carries (in address
// order): a segment that answers nothing would otherwise publish every
// VIP of the node's instances.
const wireViewsMax = 64

// wirePublished is what this sidecar last set the Node's
// AnnotationNodeWire to; only wireLoop touches it.
type wirePublished struct {
	views v1alpha1.WireViews
	at    time.Time
	// known is false until the first write: a Node may carry a previous
	// pod's views.
	known bool
	// found are the findings of the pass before (wireFinding), published
	// or not.
	found map[string]bool
}

// wireFinding is what a view says, without when.
func wireFinding(v v1alpha1.WireView) string {
	return fmt.Sprintf("%s %d %v", v.Address, v.Answers, v.Strangers)
}

// publishWire sets the Node's AnnotationNodeWire to the views of this
// pass that the pass before found too: a finding of one pass alone is a
// moment (a planned handover has both nodes answer for a second or two,
// make-before-break; seen in the cluster lab's rolls, where each such
// moment, published, kept `vipctl status` unhealthy for a pass). It
// writes when they differ from what was published (answers and
// strangers; not when), and again every WireViewRepublish while there
// are any, so that readers can tell a view that holds from one a
// stopped sidecar left behind.
func (s *Sidecar) publishWire(ctx context.Context, found v1alpha1.WireViews) error {
	p := &s.wirePub
	var views v1alpha1.WireViews
	now := map[string]bool{}
	for _, v := range found {
		now[wireFinding(v)] = true
		if p.found[wireFinding(v)] {
			views = append(views, v)
		}
	}
	p.found = now
	if len(views) > wireViewsMax {
		views = views[:wireViewsMax]
	}
	same := p.known && slices.EqualFunc(p.views, views, func(a, b v1alpha1.WireView) bool {
		return wireFinding(a) == wireFinding(b)
	})
	if same && (len(views) == 0 || time.Since(p.at) < v1alpha1.WireViewRepublish) {
		return nil
	}
	var value *string
	if len(views) > 0 {
		value = ptr.To(views.String())
	}
	if err := s.annotate(ctx, v1alpha1.AnnotationNodeWire, value); err != nil {
		p.known = false
		return err
	}
	if !same {
		s.log.Info("published what the wire says", "views", len(views))
	}
	p.views, p.at, p.known = views, time.Now(), true
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

// memberMACs asks for the peers' own addresses: their answers, and this
// node's interface, are the link-layer addresses of the instances'
// members.
func (s *Sidecar) memberMACs(ctx context.Context, tg wireTargets) (memberMACs, error) {
	m := memberMACs{byMAC: map[string]string{}}
	if err := s.o.InNetns(func() error {
		ifi, err := net.InterfaceByName(tg.iface)
		if err == nil {
			m.byMAC[ifi.HardwareAddr.String()] = s.o.NodeName + " (this node)"
		}
		return err
	}); err != nil {
		return m, err
	}
	heard, asked, err := s.askChunk(ctx, tg.iface, tg.peers)
	s.m.Wire.Questions.Add(float64(asked))
	if err != nil {
		return m, err
	}
	for _, p := range tg.peers {
		macs := heard[p]
		if len(macs) == 0 {
			m.silent = append(m.silent, p)
		}
		for _, mac := range macs {
			m.byMAC[mac.String()] = p.String()
		}
	}
	return m, nil
}

// memberMACs are the members' link-layer addresses as a pass found them.
type memberMACs struct {
	// byMAC names each member's address: this node's, or a peer's node
	// address.
	byMAC map[string]string
	// silent are the peers that did not answer for their own address.
	silent []netip.Addr
}

// strangers are the answering addresses of macs that are no member's
// (nor keepalived's virtual MAC, 00:00:5e:00:01|02:VRID, should a
// member use one). While one of peers (the VIP's instance's) does not
// answer for its own address its link-layer address is not known, and
// nothing is called a stranger; a silent peer of another instance
// blinds only that instance's VIPs.
func (m memberMACs) strangers(macs []net.HardwareAddr, peers []netip.Addr) []net.HardwareAddr {
	if slices.ContainsFunc(peers, func(p netip.Addr) bool { return slices.Contains(m.silent, p) }) {
		return nil
	}
	var out []net.HardwareAddr
	for _, mac := range macs {
		if _, ok := m.byMAC[mac.String()]; ok || len(mac) == 6 && mac[0] == 0 && mac[1] == 0 && mac[2] == 0x5e && mac[3] == 0 && (mac[4] == 1 || mac[4] == 2) {
			continue
		}
		out = append(out, mac)
	}
	return out
}

// members lists the members' link-layer addresses, for a message.
func (m memberMACs) String() string {
	out := make([]string, 0, len(m.byMAC))
	for mac, who := range m.byMAC {
		out = append(out, mac+" "+who)
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// strangerAnswers records that mac, no member's, answered for a: an Event
// on the Node (at most every foreignEventEvery for one address and
// answerer, as a foreign router's).
func (s *Sidecar) strangerAnswers(tg wireTargets, a netip.Addr, mac net.HardwareAddr, members memberMACs) {
	if !s.strangerEvents.allow(a.String()+" "+mac.String(), time.Now()) {
		return
	}
	msg := fmt.Sprintf("%s (%s) is answered on %s by %s, which is no member of its instance (members: %s): a host outside the cluster answers for the VIP; see the runbook of the alert VipctlVIPAnsweredByStranger",
		a, tg.keys[a], tg.iface, mac, members)
	s.log.Warn(msg)
	s.rec.Event(s.nodeRef, corev1.EventTypeWarning, ReasonVIPAnsweredByStranger, msg)
}

// ReasonVIPAnsweredByStranger is the Node Event's reason.
const ReasonVIPAnsweredByStranger = "VIPAnsweredByStranger"

// WireMetrics describe what the node's questions on the wire found.
type WireMetrics struct {
	Answerers *AnswerCollector
	// Strangers counts, per VIP, the answerers that are no member of
	// its instance; a VIP with none has no series.
	Strangers   *AnswerCollector
	Questions   prometheus.Counter
	PassSeconds prometheus.Gauge
}

// AnswerCollector is vipctl_wire_vip_answerers: one series per VIP the
// node asks for, made at each scrape (as HeldCollector: no labelled
// series object per VIP kept between scrapes).
type AnswerCollector struct {
	desc *prometheus.Desc
	// omitZero leaves out the series whose count is 0.
	omitZero bool
	mu       sync.Mutex
	n        map[netip.Addr]int
	// asked are the addresses asked for as of the last render, sorted: a
	// pass that began before it sets none of the others.
	asked []netip.Addr
}

func newAnswerCollector(name, help string, omitZero bool) *AnswerCollector {
	return &AnswerCollector{n: map[netip.Addr]int{}, omitZero: omitZero, desc: prometheus.NewDesc(name, help, []string{"vip"}, nil)}
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
		if n == 0 && c.omitZero {
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), a.String())
	}
}
