package sidecar

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/frr"
	"github.com/vipctl/vipctl/pkg/onnode"
)

// rememberVIPs records every VIP of the render with the key of the
// instance that carries it, for publishing which ones this node holds.
func (s *Sidecar) rememberVIPs(m *cluster.Model, st cluster.State) {
	known := m.VIPKeys(st)
	s.mu.Lock()
	s.known = known
	s.mu.Unlock()
	s.publishSoon()
}

// rememberAnnounced records the routes bgpd was given by the last
// successful apply, backup routes too (the node still carries what the
// routers send it): a bgp pool's addresses sit on no interface, so Held
// cannot find them there.
func (s *Sidecar) rememberAnnounced(pools []onnode.Announced) {
	var addrs []netip.Addr
	for _, p := range pools {
		addrs = append(addrs, p.Addrs...)
		addrs = append(addrs, p.Backup...)
	}
	s.mu.Lock()
	s.announced = addrs
	s.mu.Unlock()
	s.publishSoon()
}

// publishSoon has the held VIPs read and published now.
func (s *Sidecar) publishSoon() {
	select {
	case s.publishKick <- struct{}{}:
	default:
	}
}

// publishLoop reads which VIPs sit on this node's interfaces and records
// them in its Node's annotation whenever that changes. It reads them when
// LocalVIPs sees an address change and after every sync (publishSoon),
// not on a clock: a node that holds the same VIPs all day reads nothing.
func (s *Sidecar) publishLoop(ctx context.Context) {
	s.repeat(ctx, s.o.HeldResync, s.o.HeldInterval, 0, s.publishKick, s.publish, "publish", "cannot publish the VIPs this node holds")
}

// publishGap is the least time between two publications while the held
// VIPs keep changing (Services created one after another, a takeover
// that adds thousands of addresses in windows): the first change after
// a quiet spell is published at once, the rest together a second after
// the write before (publish).
// A node holding 1700 Service addresses publishes ~170 KB, and every
// Node watcher (each sidecar, the allocator, the kubelet's own) receives
// and decodes all of it on every change.
const publishGap = time.Second

// repeat runs step now, then every interval, whenever kick fires (nil:
// never; but not sooner than gap after the step before) and retry after
// a failure, until ctx ends; a failure is counted
// under reason and logged. A step gets Options.StepTimeout: its API calls
// have no deadline of their own, and a request sent over a connection
// whose far end died (haproxy still holding it to a lost apiserver) or to
// an apiserver waiting for etcd could block the loop for minutes, and
// with it every later publication while the node's VIPs change (seen in
// the cluster lab: a node that gave the API VIP back stayed published as
// a holder, a split brain to `vipctl status`, until its pod restarted).
func (s *Sidecar) repeat(ctx context.Context, interval, retry, gap time.Duration, kick <-chan struct{}, step func(context.Context) error, reason, msg string) {
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		wait := interval
		started := time.Now()
		stepCtx, cancel := context.WithTimeout(ctx, s.o.StepTimeout)
		err := step(stepCtx)
		cancel()
		if err != nil {
			s.m.Failures.WithLabelValues(reason).Inc()
			s.log.Error(msg, "err", cluster.DescribeAPIError(err))
			wait = retry
		}
		t.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-kick:
			// Reset discards a value the timer may have sent meanwhile
			// (Go 1.23 timers).
			t.Reset(time.Until(started.Add(gap)))
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}
}

// Held lists the VIPs this node holds now.
func (s *Sidecar) Held() (v1alpha1.HeldVIPs, error) {
	addrs, err := s.o.Addresses()
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.known == nil {
		return nil, nil
	}
	now := time.Now().UTC().Truncate(time.Second)
	on := map[netip.Addr]bool{}
	var mine []netip.Addr
	for _, a := range append(addrs, s.announced...) {
		a = a.Unmap()
		if _, ok := s.known[a]; !ok || on[a] {
			continue
		}
		on[a] = true
		mine = append(mine, a)
	}
	// In address order, sorted before they are strings.
	slices.SortFunc(mine, netip.Addr.Compare)
	var held v1alpha1.HeldVIPs
	for _, a := range mine {
		if _, ok := s.since[a]; !ok {
			s.since[a] = now
		}
		held = append(held, v1alpha1.HeldVIP{Address: a.String(), Instance: s.known[a], Since: s.since[a]})
	}
	for a := range s.since {
		if !on[a] {
			delete(s.since, a)
		}
	}
	return held, nil
}

func (s *Sidecar) publish(ctx context.Context) error {
	if err := s.publishApplied(ctx); err != nil {
		return err
	}
	s.daemonPIDs = s.m.observeDaemons(s.daemonPIDs, s.readDaemonPIDs(ctx))
	held, same, fresh, err := s.readHeld()
	if err != nil {
		return err
	}
	// What the Node says may not be what was last written: a PATCH given
	// up on (an apiserver waiting for etcd) can be applied after a later
	// one, seen in the cluster lab when a node cut off came back: three
	// VIPs published by two nodes for good. So an unchanged publication
	// is written again once it is older than half of HeldResync, at the
	// next unprompted look: the apiserver writes nothing when the Node
	// already says so.
	if same && fresh {
		return nil
	}
	// A change within publishGap of the last write waits for the rest of
	// it and goes with whatever else changed meanwhile. The gap runs from
	// the last write, not the last look: every sync looks (publishSoon),
	// and a look that found nothing new must not hold back the change
	// right after it (a drain's move waited up to a second so).
	s.mu.Lock()
	wait := time.Until(s.publishedAt.Add(publishGap))
	s.mu.Unlock()
	if !same && wait > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		if held, same, fresh, err = s.readHeld(); err != nil {
			return err
		}
		if same && fresh {
			return nil
		}
	}
	if err := s.annotate(ctx, v1alpha1.AnnotationNodeVIPs, ptr.To(held.String())); err != nil {
		// A PATCH given up on may still have been applied (an
		// apiserver answering after the deadline): what the Node says
		// is unknown now, so the next publication writes whatever it
		// finds, even what was published before. Without this, a node
		// that took a VIP and gave it back while its PATCH timed out
		// stayed published as a holder for good (the cluster lab: a
		// split brain to `vipctl status` that was not there).
		s.mu.Lock()
		s.published = nil
		s.mu.Unlock()
		return err
	}
	s.mu.Lock()
	if held == nil {
		held = v1alpha1.HeldVIPs{}
	}
	before := s.published
	s.published, s.publishedAt = held, time.Now()
	s.mu.Unlock()
	if !same {
		added, removed := heldChange(before, held)
		s.log.Info("published held VIPs", "held", len(held), "added", added, "removed", removed)
	}
	return nil
}

// readHeld reads the VIPs held now into the metrics and says whether
// they are what was last published (same) and that publication younger
// than half of HeldResync (fresh).
func (s *Sidecar) readHeld() (held v1alpha1.HeldVIPs, same, fresh bool, err error) {
	held, err = s.Held()
	if err != nil {
		return nil, false, false, err
	}
	s.m.VIPsHeld.Set(float64(len(held)))
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m.VIPHeld.Set(s.known, held)
	same = s.published != nil && reflect.DeepEqual(held, s.published) || (s.published != nil && len(held) == 0 && len(s.published) == 0)
	fresh = time.Since(s.publishedAt) < s.o.HeldResync/2
	return held, same, fresh, nil
}

// publishApplied sets the Node's AnnotationNodeConfig to the digest of
// the config last applied, when it changed.
func (s *Sidecar) publishApplied(ctx context.Context) error {
	s.mu.Lock()
	digest, done := s.appliedDigest, s.appliedDigest == s.digestPublished
	s.mu.Unlock()
	if done {
		return nil
	}
	if err := s.annotate(ctx, v1alpha1.AnnotationNodeConfig, ptr.To(digest)); err != nil {
		return err
	}
	s.mu.Lock()
	s.digestPublished = digest
	s.mu.Unlock()
	return nil
}

// heldLogged is how many addresses a log line of a publication names
// per change (the rest are counted): the whole list at thousands of
// Service addresses was the size of the annotation itself.
const heldLogged = 10

// heldChange names the addresses held now and not before, and those held
// before and not now, for the log: at most heldLogged of each, then how
// many more.
func heldChange(before, now v1alpha1.HeldVIPs) (added, removed []string) {
	was, is := map[string]bool{}, map[string]bool{}
	for _, h := range before {
		was[h.Address] = true
	}
	for _, h := range now {
		is[h.Address] = true
	}
	list := func(from v1alpha1.HeldVIPs, not map[string]bool) []string {
		var out []string
		n := 0
		for _, h := range from {
			if !not[h.Address] {
				if n++; n <= heldLogged {
					out = append(out, h.Address)
				}
			}
		}
		if n > heldLogged {
			out = append(out, fmt.Sprintf("and %d more", n-heldLogged))
		}
		return out
	}
	return list(now, was), list(before, is)
}

// annotate sets one annotation of this node's Node, or removes it when
// value is nil: the one way the sidecar writes what it publishes.
func (s *Sidecar) annotate(ctx context.Context, key string, value *string) error {
	v, err := json.Marshal(value)
	if err != nil {
		return err
	}
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%s}}}`, key, v)
	_, err = s.o.Client.CoreV1().Nodes().Patch(ctx, s.o.NodeName, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// rememberBGP notes whether the last render gave this node a frr.conf:
// only then does it have sessions to read and publish.
func (s *Sidecar) rememberBGP(files []onnode.File) {
	bgp := slices.ContainsFunc(files, func(f onnode.File) bool { return f.Path == onnode.FRRConfPath })
	s.mu.Lock()
	s.bgp, s.rendered = bgp, true
	s.mu.Unlock()
}

// readSessionsSoon has the sessions read now rather than at the next tick.
func (s *Sidecar) readSessionsSoon() {
	select {
	case s.sessionKick <- struct{}{}:
	default:
	}
}

// sessionsLoop reads bgpd's sessions every SessionInterval and after
// every FRR reload, keeps the per-session metrics, and publishes them in
// the Node's vipctl.io/bgp-sessions annotation when one changes.
func (s *Sidecar) sessionsLoop(ctx context.Context) {
	s.repeat(ctx, s.o.SessionInterval, s.o.SessionInterval, 0, s.sessionKick, s.publishSessions, "bgp-sessions", "cannot read or publish the BGP sessions")
}

func (s *Sidecar) publishSessions(ctx context.Context) error {
	s.mu.Lock()
	rendered, bgp, prev := s.rendered, s.bgp, s.sessions
	s.mu.Unlock()
	if !rendered {
		// Whether the node has bgp pools is not known before the first
		// render: leave the Node as it is until then.
		return nil
	}
	if !s.onNodeKnown {
		// A restarted sidecar carries on from what its Node says, so a
		// session up for days keeps its Since and nothing is rewritten.
		// Asked once: the informers strip this annotation.
		n, err := s.o.Client.CoreV1().Nodes().Get(ctx, s.o.NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		s.onNode, s.onNodeKnown = nil, true
		if v, ok := n.Annotations[v1alpha1.AnnotationNodeBGPSessions]; ok {
			s.onNode = &v
			prev, _ = v1alpha1.ParseBGPSessions(v)
		}
	}
	var want *string
	var now v1alpha1.BGPSessions
	var readErr error
	if bgp {
		peers, running, err := frr.ReadSessions(ctx, s.o.Target)
		if err != nil || !running {
			// bgpd crashed, hangs or is not started (yet): what it said
			// last no longer holds, and its sessions must not keep
			// showing Established.
			peers, readErr = unknownPeers(prev), err
		}
		now = frr.Sessions(prev, peers, time.Now())
		want = ptr.To(now.String())
	}
	s.m.observeSessions(prev, now)
	s.mu.Lock()
	s.sessions = now
	s.mu.Unlock()
	if (want == nil) == (s.onNode == nil) && (want == nil || *want == *s.onNode) {
		return readErr
	}
	if err := s.annotate(ctx, v1alpha1.AnnotationNodeBGPSessions, want); err != nil {
		// Maybe applied after all (see publish): read the Node again
		// before the next comparison.
		s.onNodeKnown = false
		return errors.Join(readErr, err)
	}
	s.onNode = want
	s.log.Info("published BGP sessions", "sessions", now.String())
	return readErr
}

// unknownPeers are the sessions last known, in state Unknown: bgpd could
// not be asked.
func unknownPeers(prev v1alpha1.BGPSessions) []frr.PeerState {
	out := make([]frr.PeerState, 0, len(prev))
	for _, p := range prev {
		out = append(out, frr.PeerState{Peer: p.Peer, ASN: p.ASN, State: v1alpha1.BGPStateUnknown, Dropped: p.Dropped})
	}
	return out
}

// probeAPI asks the API's /readyz with the node's identity (every
// identity may) and sets vipctl_runtimecfg_api_reachable by the answer.
func (s *Sidecar) probeAPI(ctx context.Context) error {
	err := s.o.Client.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Error()
	s.m.APIReachable.Set(b2f(err == nil))
	return err
}
