package bootstrap

import (
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
)

// Validate checks the options on their own, naming the flag of each
// problem, all at once: Run calls it before it reads a file, asks a node
// or writes anything.
func (o Options) Validate() error {
	var errs []error
	if o.Config == "" {
		errs = append(errs, errors.New("--file: empty: the cluster file naming the bootstrap host (spec.bootstrap)"))
	}
	if o.Nodes == "" {
		errs = append(errs, errors.New("--nodes: empty: the node list the MachineConfigs were rendered with"))
	}
	if o.Interface != "" {
		if msg := v1alpha1.InterfaceNameError(o.Interface); msg != "" {
			errs = append(errs, fmt.Errorf("--interface %q: %s", o.Interface, msg))
		}
	}
	// The daemons' files go under Dir at the node paths: "" or "/" would
	// put them at the host's own /etc/vipctl-keepalived, /run/....
	if o.Dir == "" || filepath.Clean(o.Dir) == "/" {
		errs = append(errs, fmt.Errorf("--dir %q: a directory of its own for this run's files (default %s), not the host's root", o.Dir, DefaultDir))
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
		why  string
	}{
		{"--yield-after", o.YieldAfter, "how long the control-plane nodes must answer without a break before they get the VIP"},
		{"--grace", o.Grace, "how long the connections accepted here are served after the VIP left; without it they are reset"},
	} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("%s %s: must be positive: %s", d.flag, d.v, d.why))
		}
	}
	for _, a := range o.Servers {
		if why := unusableServer(a); why != "" {
			errs = append(errs, fmt.Errorf("--bootstrap-address %s: %s", a, why))
		}
	}
	return errors.Join(errs...)
}

// unusableServer says why haproxy cannot reach the bootstrap machine's
// kube-apiserver at a, or "".
func unusableServer(a netip.Addr) string {
	switch {
	case a.IsUnspecified():
		return "the unspecified address names no host: give the bootstrap machine's address (or leave the flag out on the bootstrap machine itself)"
	case a.IsLoopback():
		return "a loopback address: haproxy would balance onto this host, and the control-plane nodes could not reach it either"
	case a.IsMulticast():
		return "a multicast address names no host"
	case a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return "the broadcast address names no host"
	case a.Is6() && a.IsLinkLocalUnicast():
		return "an IPv6 link-local address needs an interface to be reached: give the bootstrap machine's address in the machine network"
	}
	return ""
}

// checkServersAgainst refuses a --bootstrap-address that the cluster file
// says is no bootstrap machine: a VIP (haproxy would balance onto the VIP
// it serves) or an address outside every machine network.
func checkServersAgainst(c *v1alpha1.ClusterVIPs, file string, servers []netip.Addr) error {
	vips := map[netip.Addr]string{}
	add := func(list []string, field string) {
		for i, s := range list {
			if a, err := netip.ParseAddr(s); err == nil {
				vips[a.Unmap()] = fmt.Sprintf("%s[%d]", field, i)
			}
		}
	}
	add(c.Spec.API.VIPs, "spec.api.vips")
	add(c.Spec.API.InternalVIPs, "spec.api.internalVIPs")
	for i, in := range c.Spec.Ingress {
		add(in.VIPs, fmt.Sprintf("spec.ingress[%d].vips", i))
	}
	var networks []netip.Prefix
	for _, s := range c.Spec.MachineNetworks {
		if p, err := netip.ParsePrefix(s); err == nil {
			networks = append(networks, p.Masked())
		}
	}
	var errs []error
	for _, a := range servers {
		if field, ok := vips[a.Unmap()]; ok {
			errs = append(errs, fmt.Errorf("--bootstrap-address %s: is %s of %s: haproxy would balance onto the VIP it serves; give the bootstrap machine's own address", a, field, file))
			continue
		}
		if len(networks) > 0 && !slices.ContainsFunc(networks, func(n netip.Prefix) bool { return n.Contains(a.Unmap()) }) {
			errs = append(errs, fmt.Errorf("--bootstrap-address %s: outside spec.machineNetworks (%s) of %s: the bootstrap machine is a host of the machine network", a, strings.Join(c.Spec.MachineNetworks, ", "), file))
		}
	}
	return errors.Join(errs...)
}
