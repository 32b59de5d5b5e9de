package sidecar

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"time"

	"k8s.io/client-go/rest"

	"github.com/vipctl/vipctl/pkg/cluster"
)

// APIDialer reaches the API server without depending on the API VIP
// alone. On OpenShift the kubelet's kubeconfig names api-int, which is the
// API VIP itself: in a whole-cluster cold start, or while the VIP has no
// holder, the sidecar that would fix it could not reach the API. So a
// dial first tries the address the kubeconfig names and then, when that
// fails, each fallback endpoint in order (this node's own kube-apiserver
// first on a control-plane node, then the other control-plane nodes).
// Only the TCP destination changes: TLS still verifies the kubeconfig's
// server name, which every kube-apiserver's certificate carries.
type APIDialer struct {
	// Fallbacks are host:port endpoints tried in order after the
	// kubeconfig's own address.
	Fallbacks []string
	// Timeout bounds each attempt, so a dead VIP costs one timeout, not
	// the client's whole request deadline.
	Timeout time.Duration
}

// DialContext is a rest.Config Dial function.
func (d *APIDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	timeout := d.Timeout
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	var errs []error
	for _, a := range append([]string{addr}, d.Fallbacks...) {
		if ctx.Err() != nil {
			break
		}
		nd := net.Dialer{Timeout: timeout}
		conn, err := nd.DialContext(ctx, network, a)
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("no API server answered: %w", errors.Join(append(errs, ctx.Err())...))
}

// APIFallbacks lists the control-plane nodes' addresses at port, this
// node's first when it is one of them (its local kube-apiserver needs no
// network at all), the others by name.
func APIFallbacks(nodes []cluster.Node, self string, port int) []string {
	var own, others []string
	for _, n := range nodes {
		if !n.ControlPlane || len(n.Addresses) == 0 {
			continue
		}
		ep := netip.AddrPortFrom(n.Addresses[0], uint16(port)).String()
		if n.Name == self {
			own = append(own, ep)
		} else {
			others = append(others, ep)
		}
	}
	return append(own, others...)
}

// apiPort is the port of a kubeconfig server URL's host ("host:port" or
// "host"), 443 when it names none.
func apiPort(hostport string) int {
	if _, p, err := net.SplitHostPort(hostport); err == nil {
		if n, err := strconv.Atoi(p); err == nil {
			return n
		}
	}
	return 443
}

// WithAPIFallback makes cfg dial through an APIDialer whose fallbacks are
// the control-plane nodes among nodes, at the port cfg's server URL names.
// Without a control-plane node it leaves cfg as it is.
func WithAPIFallback(cfg *rest.Config, nodes []cluster.Node, self string) {
	host := cfg.Host
	if u, err := url.Parse(cfg.Host); err == nil && u.Host != "" {
		host = u.Host
	}
	fb := APIFallbacks(nodes, self, apiPort(host))
	if len(fb) == 0 {
		return
	}
	cfg.Dial = (&APIDialer{Fallbacks: fb}).DialContext
}
