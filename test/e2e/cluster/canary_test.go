package cluster

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/vipctl/vipctl/test/clusterlab"
)

// canaryName and canaryAddr are a Service without a selector and the one
// endpoint its EndpointSlice names: nothing answers there, no request is
// sent to it, and every kube-proxy writes it into its table.
const (
	canaryName = "canary"
	canaryAddr = "203.0.113.126"
)

// canaryLimit is how long each kube-proxy may take to follow the canary's
// endpoint coming and going: a live watch takes a second or two.
const canaryLimit = 90 * time.Second

// proxiesFollowCanary shows every running node's kube-proxy receiving
// the API's changes now: an endpoint added to a Service of its own
// reaches every node's nftables, then its removal does, and how long each
// node took is logged. A kube-proxy whose tables are current is not
// proven alive by that alone: after a cold start one listed the
// EndpointSlices and then received nothing for 30 s (docs/lab.md), while
// its tables still matched the API until the pods moved. The roll after
// the cold start starts once each node has followed a change.
func proxiesFollowCanary(t *testing.T, c *clusterlab.Cluster) {
	t.Helper()
	ctx := t.Context()
	svcs := c.Admin.CoreV1().Services(clusterlab.WorkloadNS)
	eps := c.Admin.DiscoveryV1().EndpointSlices(clusterlab.WorkloadNS)
	_, err := svcs.Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: canaryName},
		Spec: corev1.ServiceSpec{
			IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
			Ports:      []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("canary Service: %v", err)
	}
	t.Cleanup(func() {
		_ = svcs.Delete(context.Background(), canaryName, metav1.DeleteOptions{})
	})
	_, err = eps.Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: canaryName, Labels: map[string]string{discoveryv1.LabelServiceName: canaryName}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{canaryAddr},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true)}}},
		Ports: []discoveryv1.EndpointPort{{Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("canary EndpointSlice: %v", err)
	}
	t.Logf("kube-proxy added the canary's endpoint: %s", awaitCanary(t, c, true))
	if err := svcs.Delete(ctx, canaryName, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting the canary Service: %v", err)
	}
	_ = eps.Delete(ctx, canaryName, metav1.DeleteOptions{})
	t.Logf("kube-proxy removed it: %s", awaitCanary(t, c, false))
}

// awaitCanary waits until every running node's kube-proxy sends (want)
// or no longer sends the canary's traffic to its endpoint, and says how
// long each took; a node that did not within canaryLimit fails the test.
func awaitCanary(t *testing.T, c *clusterlab.Cluster, want bool) string {
	t.Helper()
	began := time.Now()
	took := map[string]time.Duration{}
	for {
		for _, n := range c.Nodes {
			if _, done := took[n.Name]; done || !n.Running() {
				continue
			}
			out, err := n.Host.Exec("nft", "list", "table", "ip", "kube-proxy")
			if err != nil {
				continue
			}
			has := slices.Contains(proxyEndpoints(string(out), false)[clusterlab.WorkloadNS+"/"+canaryName], canaryAddr)
			if has == want {
				took[n.Name] = time.Since(began)
			}
		}
		if len(took) == countRunning(c) || time.Since(began) > canaryLimit {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	var parts, late []string
	for _, n := range c.Nodes {
		d, ok := took[n.Name]
		switch {
		case !n.Running():
		case ok:
			parts = append(parts, n.Name+" "+d.Round(100*time.Millisecond).String())
		default:
			late = append(late, n.Name)
		}
	}
	if len(late) > 0 {
		t.Errorf("kube-proxy on %s did not follow the canary's endpoint (present: %v) within %s", strings.Join(late, ", "), want, canaryLimit)
	}
	return strings.Join(parts, ", ")
}

func countRunning(c *clusterlab.Cluster) int {
	n := 0
	for _, node := range c.Nodes {
		if node.Running() {
			n++
		}
	}
	return n
}
