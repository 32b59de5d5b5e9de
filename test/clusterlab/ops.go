package clusterlab

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vipctl/vipctl/test/lab"
	"github.com/vipctl/vipctl/test/netlab"
)

// RequestTimeout is how long a poller's request may take before it counts
// as failed. Longer than the process lab's (lab.PollTimeout): three
// apiservers, etcd and four kubelets share the two cores with the client,
// and a slow answer is not a lost one. It was 1 s until a CI rehearsal
// (2026-11-26) failed 8 requests that were merely slow, answers of
// 0.98–1.03 s around them, while a new kube-apiserver took 1m48s to
// start beside the others. A lost SYN (answered after the client's 1 s
// retransmission) no longer counts as failed here; the pollers report
// the client's retransmissions instead.
const RequestTimeout = 2 * time.Second

// PollInterval is the pollers' pace: one request at a time, a new
// connection each.
const PollInterval = 50 * time.Millisecond

// Poll asks url from the client every PollInterval, one request at a
// time, until stopped.
func (c *Cluster) Poll(url string) *lab.Poller {
	return lab.StartPolling(c.Client, url, PollInterval, RequestTimeout, false)
}

// APIVersionURL is what the API pollers ask through the VIP at vip:
// /version, which every kube-apiserver answers (anonymous) without
// etcd. Not /readyz: an apiserver shutting down fails /readyz on purpose
// while it still serves, so haproxy takes it out first.
func APIVersionURL(vip string) string {
	return strings.TrimSuffix(APIURL(vip), "/readyz") + "/version"
}

// EndpointNodes are the nodes where a ready endpoint of the Service runs,
// sorted, from its EndpointSlices.
func (c *Cluster) EndpointNodes(t testing.TB, service string) []string {
	t.Helper()
	ctx, cancel := callCtx()
	defer cancel()
	list, err := c.Admin.DiscoveryV1().EndpointSlices(WorkloadNS).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + service})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range list.Items {
		for _, e := range s.Endpoints {
			if e.NodeName != nil && e.Conditions.Ready != nil && *e.Conditions.Ready {
				out = append(out, *e.NodeName)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// DescribePath is what an administrator looks at when addr does not
// answer: the client's route to it (a redirect it took shows there), the
// router's route, and every running node's route for it.
func (c *Cluster) DescribePath(addr string) string {
	var b strings.Builder
	family := "-4"
	if strings.Contains(addr, ":") {
		family = "-6"
	}
	for _, h := range []*netlab.Host{c.Client, c.Tor} {
		out, err := h.Exec("ip", family, "route", "get", addr)
		fmt.Fprintf(&b, "%s: ip route get %s: %s%v\n", h.Name, addr, strings.TrimSpace(string(out)), errOrEmpty(err))
	}
	for _, n := range c.Nodes {
		if !n.Running() {
			continue
		}
		out, err := n.Host.Exec("ip", family, "route", "get", addr)
		fmt.Fprintf(&b, "%s: ip route get %s: %s%v\n", n.Name, addr, strings.TrimSpace(string(out)), errOrEmpty(err))
	}
	return b.String()
}

func errOrEmpty(err error) any {
	if err == nil {
		return ""
	}
	return err
}
