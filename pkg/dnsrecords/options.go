package dnsrecords

import (
	"errors"
	"fmt"
	"net/netip"
	"time"
)

// DefaultTimeout is how long each query waits for its answer unless told.
const DefaultTimeout = 2 * time.Second

// Validate checks the options on their own, naming the flag of each
// problem, all at once: Check calls it before it reads resolv.conf or
// sends a query, so a bad flag is never reported as a server that does
// not answer.
func (o CheckOptions) Validate() error {
	var errs []error
	if o.Server != "" {
		if _, err := parseServer(o.Server); err != nil {
			errs = append(errs, err)
		}
	}
	if o.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("--timeout %s: must be positive: how long each query waits for its answer (default %s)", o.Timeout, DefaultTimeout))
	}
	return errors.Join(errs...)
}

// parseServer is --server as an address and port (53 when none is given).
func parseServer(s string) (netip.AddrPort, error) {
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		a, aerr := netip.ParseAddr(s)
		if aerr != nil {
			return netip.AddrPort{}, fmt.Errorf("--server %q: not an IP address, or an address and port (198.51.100.53, [2001:db8::53]:5353)", s)
		}
		ap = netip.AddrPortFrom(a, 53)
	}
	a := ap.Addr()
	switch {
	case ap.Port() == 0:
		return ap, fmt.Errorf("--server %q: port 0: no DNS server listens there (leave the port out for 53)", s)
	case a.IsUnspecified(), a.IsMulticast(), a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return ap, fmt.Errorf("--server %q: %s names no server: give the DNS server's own address", s, a)
	case a.Zone() != "":
		return ap, fmt.Errorf("--server %q: an address with a zone: give the DNS server's address without %%%s", s, a.Zone())
	}
	return ap, nil
}
