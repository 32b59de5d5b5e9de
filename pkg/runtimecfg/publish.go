package runtimecfg

import (
	"context"
	"fmt"
	"net/netip"
	"reflect"
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/render"
)

// rememberVIPs records every VIP of the render with the key of the
// instance that carries it, for publishing which ones this node holds.
func (s *Sidecar) rememberVIPs(m *cluster.Model, st cluster.State) {
	known := m.VIPKeys(st)
	s.mu.Lock()
	s.known = known
	s.mu.Unlock()
}

// rememberAnnounced records the routes bgpd was given by the last
// successful apply: a bgp pool's addresses sit on no interface, so Held
// cannot find them there.
func (s *Sidecar) rememberAnnounced(pools []render.Announced) {
	var addrs []netip.Addr
	for _, p := range pools {
		addrs = append(addrs, p.Addrs...)
	}
	s.mu.Lock()
	s.announced = addrs
	s.mu.Unlock()
}

// publishLoop reads which VIPs sit on this node's interfaces and records
// them in its Node's annotation whenever that changes.
func (s *Sidecar) publishLoop(ctx context.Context) {
	t := time.NewTicker(s.o.HeldInterval)
	defer t.Stop()
	for {
		if err := s.publish(ctx); err != nil {
			s.m.Failures.WithLabelValues("publish").Inc()
			s.log.Error("cannot publish the VIPs this node holds", "err", cluster.DescribeAPIError(err))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
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
	var held v1alpha1.HeldVIPs
	for _, a := range append(addrs, s.announced...) {
		key, ok := s.known[a.Unmap()]
		if !ok || on[a.Unmap()] {
			continue
		}
		a = a.Unmap()
		on[a] = true
		if _, ok := s.since[a]; !ok {
			s.since[a] = now
		}
		held = append(held, v1alpha1.HeldVIP{Address: a.String(), Instance: key, Since: s.since[a]})
	}
	for a := range s.since {
		if !on[a] {
			delete(s.since, a)
		}
	}
	sortHeld(held)
	return held, nil
}

func (s *Sidecar) publish(ctx context.Context) error {
	held, err := s.Held()
	if err != nil {
		return err
	}
	s.m.VIPsHeld.Set(float64(len(held)))
	s.mu.Lock()
	same := s.published != nil && reflect.DeepEqual(held, s.published) || (s.published != nil && len(held) == 0 && len(s.published) == 0)
	s.mu.Unlock()
	if same {
		return nil
	}
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, v1alpha1.AnnotationNodeVIPs, held.String())
	if _, err := s.o.Client.CoreV1().Nodes().Patch(ctx, s.o.NodeName, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return err
	}
	s.mu.Lock()
	if held == nil {
		held = v1alpha1.HeldVIPs{}
	}
	s.published = held
	s.mu.Unlock()
	s.log.Info("published held VIPs", "vips", held.String())
	return nil
}

func sortHeld(h v1alpha1.HeldVIPs) {
	sort.Slice(h, func(i, j int) bool {
		return netip.MustParseAddr(h[i].Address).Less(netip.MustParseAddr(h[j].Address))
	})
}
