package sidecar

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/onnode"
)

// bgpPasswordInterval is how often the sidecar reads the peers'
// passwordSecrets: a rotated password reaches frr.conf within it. A get
// of each Secret by name (the nodes may not list the namespace's
// Secrets, docs/permissions.md), not a watch.
const bgpPasswordInterval = 10 * time.Second

// bgpPasswords holds the BGP peers' passwords as last read, by Secret
// name. A Secret that cannot be read, or holds no valid password, keeps
// the password read before (the session stays as it is) and is logged
// and counted; one never read leaves the password out of frr.conf.
type bgpPasswords struct {
	mu     sync.Mutex
	byName map[string]string
}

// get is a copy of the passwords read so far.
func (p *bgpPasswords) get() map[string]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.byName)
}

// seedPasswords takes the passwords the node's frr.conf holds now, by
// the peer each belongs to, as read already: a sidecar that restarts
// while the API is away (or its Secret unreadable) renders frr.conf with
// the password its sessions run on, rather than without it, which would
// drop them.
func (s *Sidecar) seedPasswords() {
	data, err := os.ReadFile(s.o.Path(onnode.FRRConfPath))
	if err != nil || s.static.Spec.BGP == nil {
		return
	}
	byPeer := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) == 4 && f[0] == "neighbor" && f[2] == "password" {
			byPeer[f[1]] = f[3]
		}
	}
	s.passwords.mu.Lock()
	defer s.passwords.mu.Unlock()
	for _, peer := range s.static.Spec.BGP.Peers {
		if pw, ok := byPeer[peer.Address]; ok && peer.PasswordSecret != "" {
			if s.passwords.byName == nil {
				s.passwords.byName = map[string]string{}
			}
			s.passwords.byName[peer.PasswordSecret] = pw
		}
	}
}

// passwordsLoop reads the Secrets the config in force names, and syncs
// when a password changed. Run has read them once before the first
// sync: the loop's first read is one interval later, not at once again.
func (s *Sidecar) passwordsLoop(ctx context.Context) {
	select {
	case <-ctx.Done():
		return
	case <-time.After(bgpPasswordInterval):
	}
	s.repeat(ctx, bgpPasswordInterval, bgpPasswordInterval, 0, nil, s.readPasswords, "bgp-passwords", "cannot read a BGP peer's password")
}

// readPasswords reads each passwordSecret of the config in force (the
// static file's spec.bgp), keeps the valid ones, and triggers a sync when
// one changed.
func (s *Sidecar) readPasswords(ctx context.Context) error {
	names := s.static.BGPPasswordSecrets()
	if len(names) == 0 {
		return nil
	}
	var errs []error
	changed := false
	for _, name := range names {
		sec, err := s.o.Client.CoreV1().Secrets(s.o.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			errs = append(errs, fmt.Errorf("secret %s/%s: %s", s.o.Namespace, name, cluster.DescribeAPIError(err)))
			continue
		}
		pw, ok := sec.Data[v1alpha1.BGPPasswordKey]
		if !ok {
			errs = append(errs, fmt.Errorf("secret %s/%s has no key %s", s.o.Namespace, name, v1alpha1.BGPPasswordKey))
			continue
		}
		if why := v1alpha1.CheckBGPPassword(pw); why != "" {
			// Never the value itself: it is a secret even when wrong.
			errs = append(errs, fmt.Errorf("secret %s/%s, key %s: %s", s.o.Namespace, name, v1alpha1.BGPPasswordKey, why))
			continue
		}
		s.passwords.mu.Lock()
		if s.passwords.byName == nil {
			s.passwords.byName = map[string]string{}
		}
		if s.passwords.byName[name] != string(pw) {
			s.passwords.byName[name], changed = string(pw), true
		}
		s.passwords.mu.Unlock()
	}
	if changed {
		s.log.Info("BGP password read; frr.conf follows", "secrets", names)
		s.trigger()
	}
	return errors.Join(errs...)
}
