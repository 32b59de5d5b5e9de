package frr

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"time"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/host"
	"github.com/vipctl/vipctl/pkg/onnode"
)

// PeerState is one BGP session as this node's bgpd reports it.
type PeerState struct {
	Peer  string
	ASN   uint32
	State string
	// InState is how long the session has been in State by bgpd's clock:
	// up for Established, since its last reset otherwise; zero when bgpd
	// does not say (a session that never came up).
	InState                        time.Duration
	PrefixesSent, PrefixesReceived int
	Established, Dropped           int
	// BFD is the BFD session's status; empty without BFD.
	BFD string
}

// bgpNeighbor is the part of one peer of FRR's `show bgp neighbors
// json` (8.4) that vipctl reads.
type bgpNeighbor struct {
	RemoteAs       uint32 `json:"remoteAs"`
	BGPState       string `json:"bgpState"`
	UpMsec         *int64 `json:"bgpTimerUpMsec"`
	LastResetMsecs *int64 `json:"lastResetTimerMsecs"`
	Established    int    `json:"connectionsEstablished"`
	Dropped        int    `json:"connectionsDropped"`
	Families       map[string]struct {
		Accepted int `json:"acceptedPrefixCounter"`
		Sent     int `json:"sentPrefixCounter"`
	} `json:"addressFamilyInfo"`
	BFD *struct {
		Status string `json:"status"`
	} `json:"peerBfdInfo"`
}

// ParseNeighbors reads FRR's `show bgp neighbors json`, sorted by peer.
func ParseNeighbors(b []byte) ([]PeerState, error) {
	var raw map[string]bgpNeighbor
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("show bgp neighbors json: %w", err)
	}
	out := make([]PeerState, 0, len(raw))
	for peer, n := range raw {
		p := PeerState{Peer: peer, ASN: n.RemoteAs, State: n.BGPState, Established: n.Established, Dropped: n.Dropped}
		switch {
		case n.BGPState == v1alpha1.BGPStateEstablished && n.UpMsec != nil:
			p.InState = time.Duration(*n.UpMsec) * time.Millisecond
		case n.BGPState != v1alpha1.BGPStateEstablished && n.LastResetMsecs != nil:
			p.InState = time.Duration(*n.LastResetMsecs) * time.Millisecond
		}
		for _, f := range n.Families {
			p.PrefixesSent += f.Sent
			p.PrefixesReceived += f.Accepted
		}
		if n.BFD != nil {
			p.BFD = n.BFD.Status
		}
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Peer < out[j].Peer })
	return out, nil
}

// ReadSessions asks the node's bgpd for its sessions over its vty
// socket. ok is false while bgpd is not running.
func ReadSessions(ctx context.Context, t host.Target) (peers []PeerState, ok bool, err error) {
	vty, running := bgpdRunning(t)
	if !running {
		return nil, false, nil
	}
	return readSessions(ctx, t, vty)
}

// ReadHostSessions is ReadSessions from the node's own filesystem rather
// than the keepalived pod's (vipctl diagnose --local on the host), where
// the vty sockets lie in onnode.HostFRRRunDir.
func ReadHostSessions(ctx context.Context, t host.Target) (peers []PeerState, ok bool, err error) {
	vty, running := hostBgpdRunning(t)
	if !running {
		return nil, false, nil
	}
	return readSessions(ctx, t, vty)
}

// hostBgpdRunning is bgpdRunning from the node's own filesystem, where
// the pod's vty sockets lie in onnode.HostFRRRunDir.
func hostBgpdRunning(t host.Target) (vtyDir string, running bool) {
	vty := t.Path(onnode.HostFRRRunDir)
	_, err := os.Stat(bgpdVty(vty))
	return vty, err == nil
}

func readSessions(ctx context.Context, t host.Target, vty string) (peers []PeerState, ok bool, err error) {
	var out, diag bytes.Buffer
	cmd := exec.CommandContext(ctx, vtysh(t), "--vty_socket", vty, "-c", "show bgp neighbors json")
	cmd.Stdout, cmd.Stderr = &out, &diag
	if err := cmd.Run(); err != nil {
		// vtysh says "bgpd is not running" on stdout.
		msg := strings.TrimSpace(out.String() + diag.String())
		return nil, true, fmt.Errorf("vtysh show bgp neighbors json: %s: %w", boundOutput([]byte(msg)), err)
	}
	peers, err = ParseNeighbors(out.Bytes())
	return peers, true, err
}

// Sessions turns what bgpd reports into what the node publishes. A
// session keeps its previous Since while it stays in the same state
// without a drop in between, so the value changes only when a session
// does, not with every uptime tick (one annotation write per change, not
// per read, on every node of a large cluster).
func Sessions(prev v1alpha1.BGPSessions, peers []PeerState, now time.Time) v1alpha1.BGPSessions {
	old := make(map[string]v1alpha1.BGPSession, len(prev))
	for _, s := range prev {
		old[s.Peer] = s
	}
	out := make(v1alpha1.BGPSessions, 0, len(peers))
	for _, p := range peers {
		s := v1alpha1.BGPSession{Peer: p.Peer, ASN: p.ASN, State: p.State, Since: now.Add(-p.InState).UTC().Truncate(time.Second),
			PrefixesSent: p.PrefixesSent, PrefixesReceived: p.PrefixesReceived, Dropped: p.Dropped, BFD: p.BFD}
		if o, ok := old[p.Peer]; ok && o.State == s.State && o.Dropped == s.Dropped {
			s.Since = o.Since
		}
		out = append(out, s)
	}
	return out
}

// policyCommands show the outbound policy bgpd runs: the route-maps
// (with how often each entry matched) and the prefix-lists they and the
// peers' outbound filters name. Neither holds a password.
var policyCommands = []string{"show route-map", "show ip prefix-list", "show ipv6 prefix-list"}

// ReadPolicy asks bgpd, where ReadSessions or ReadHostSessions would,
// for the routing policy in force (policyCommands): what runs, which a
// failed reload can leave apart from frr.conf. ok is false when bgpd is
// not running.
func ReadPolicy(ctx context.Context, t host.Target) (policy string, ok bool, err error) {
	vty, running := bgpdRunning(t)
	if !running {
		if vty, running = hostBgpdRunning(t); !running {
			return "", false, nil
		}
	}
	args := []string{"--vty_socket", vty}
	for _, c := range policyCommands {
		args = append(args, "-c", c)
	}
	var out, diag bytes.Buffer
	cmd := exec.CommandContext(ctx, vtysh(t), args...)
	cmd.Stdout, cmd.Stderr = &out, &diag
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(out.String() + diag.String())
		return "", true, fmt.Errorf("vtysh %s: %s: %w", strings.Join(policyCommands, "; "), boundOutput([]byte(msg)), err)
	}
	return out.String(), true, nil
}
