package frr

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
)

// networkDelta is how bgpd goes from the frr.conf old to new when the two
// differ in `network` lines only (a Service address announced or
// withdrawn, the change a cluster makes all day): vtysh's commands, each
// under the `router bgp` and `address-family` it sits in. ok is false for
// any other difference (a peer, a timer, a route-map), or when old is
// unknown: those go through frr-reload.py.
func networkDelta(old, new []byte) (cmds []string, ok bool) {
	if old == nil {
		return nil, false
	}
	restOld, netOld := splitNetworks(old)
	restNew, netNew := splitNetworks(new)
	if !slices.Equal(restOld, restNew) {
		return nil, false
	}
	cmds = []string{"configure terminal"}
	var router, family string
	enter := func(n network) {
		if n.router != router {
			if family != "" {
				cmds = append(cmds, "exit-address-family")
			}
			if router != "" {
				cmds = append(cmds, "exit")
			}
			router, family = n.router, ""
			cmds = append(cmds, n.router)
		}
		if n.family != family {
			if family != "" {
				cmds = append(cmds, "exit-address-family")
			}
			family = n.family
			cmds = append(cmds, n.family)
		}
	}
	// Withdrawals first, as frr-reload.py orders them.
	for _, n := range netOld {
		if !slices.Contains(netNew, n) {
			enter(n)
			cmds = append(cmds, "no "+n.line)
		}
	}
	for _, n := range netNew {
		if !slices.Contains(netOld, n) {
			enter(n)
			cmds = append(cmds, n.line)
		}
	}
	if len(cmds) == 1 {
		return nil, true
	}
	return append(cmds, "end"), true
}

// network is one `network` line of frr.conf with where it stands.
type network struct{ router, family, line string }

// splitNetworks splits an frr.conf into its lines other than `network`
// ones (trimmed) and its `network` lines, each with the `router bgp` and
// `address-family` lines above it. A `network` line outside an address
// family counts as another line: it takes the full reload.
func splitNetworks(conf []byte) (rest []string, networks []network) {
	var router, family string
	sc := bufio.NewScanner(bytes.NewReader(conf))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "router bgp"):
			router, family = line, ""
		case strings.HasPrefix(line, "address-family "):
			family = line
		case line == "exit-address-family":
			family = ""
		case line == "exit" && family == "":
			router = ""
		case strings.HasPrefix(line, "network ") && router != "" && family != "":
			networks = append(networks, network{router, family, line})
			continue
		}
		rest = append(rest, line)
	}
	return rest, networks
}

// configure sends commands to bgpd in one vtysh session: each must
// succeed (vtysh exits non-zero on the first that fails).
func configure(ctx context.Context, vtysh, vty string, cmds []string) error {
	args := []string{"--vty_socket", vty}
	for _, c := range cmds {
		args = append(args, "-c", c)
	}
	if out, err := exec.CommandContext(ctx, vtysh, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("vtysh: %s: %w", boundOutput(out), err)
	}
	return nil
}
