package clusterlab

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/manifests"
	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/test/lab"
	"github.com/vipctl/vipctl/test/lab/probe"
)

// connectAdmin makes the administrator's client: cluster-admin by a
// client certificate, through the API VIP, dialled from the client's
// namespace; and the same as a kubeconfig file for the CLI.
func (c *Cluster) connectAdmin(t testing.TB) {
	t.Helper()
	c.AdminConfig = &rest.Config{
		Host:            apiURL(),
		TLSClientConfig: rest.TLSClientConfig{CAData: c.pki.ca.CertPEM(), CertData: c.pki.adminCert, KeyData: c.pki.adminKey},
		Dial:            c.Client.DialContext,
		Timeout:         15 * time.Second,
	}
	c.Admin = kubernetes.NewForConfigOrDie(c.AdminConfig)
	c.Kubeconfig = filepath.Join(c.dir, "admin.kubeconfig")
	data := c.pki.write(t, apiURL(), &clientcmdapi.AuthInfo{ClientCertificateData: c.pki.adminCert, ClientKeyData: c.pki.adminKey})
	if err := os.WriteFile(c.Kubeconfig, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// WaitAPI waits until the API answers through the API VIP.
func (c *Cluster) WaitAPI(t testing.TB, timeout time.Duration) {
	t.Helper()
	var last error
	if !lab.WaitUntil(timeout, func() bool {
		ctx, cancel := callCtx()
		defer cancel()
		_, last = c.Admin.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
		return last == nil
	}) {
		c.DumpLogs()
		fatalf(t, "the API through the API VIP: not within %s: %v (%s)", timeout, last, c.apiState(t))
	}
}

// apiState tells, for a failure message, what each kube-apiserver's
// /readyz answers (from the client, at the node's address) and who holds
// the API VIP.
func (c *Cluster) apiState(t testing.TB) string {
	t.Helper()
	var parts []string
	for _, n := range c.Masters() {
		if !n.Running() {
			parts = append(parts, n.Name+" off")
			continue
		}
		_, err := c.Get(APIURL(n.Spec.IP4))
		state := "ready"
		if err != nil {
			state = err.Error()
		}
		parts = append(parts, n.Name+" apiserver: "+state)
	}
	return strings.Join(parts, "; ") + "; API VIP held by " + strings.Join(c.Holders(t, APIVIP4), ",")
}

// labelNodes gives every node its role's labels as soon as its kubelet
// has registered it. A kubelet may not label itself with node roles
// (NodeRestriction; upstream's kubelet refuses them in --node-labels), so
// an installer does it, as kubeadm's mark-control-plane phase does.
func (c *Cluster) labelNodes(t testing.TB, timeout time.Duration) {
	t.Helper()
	pending := map[string]NodeSpec{}
	for _, s := range Nodes {
		pending[s.Name] = s
	}
	deadline := time.Now().Add(timeout)
	for len(pending) > 0 {
		for name, s := range pending {
			patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": roleLabels(s.Role)}})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := callCtx()
			_, err = c.Admin.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
			cancel()
			if err == nil {
				delete(pending, name)
			}
		}
		if time.Now().After(deadline) {
			c.DumpLogs()
			fatalf(t, "nodes not registered within %s: %v", timeout, keys(pending))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// WaitNodesReady waits until every running node is Ready.
func (c *Cluster) WaitNodesReady(t testing.TB, timeout time.Duration) {
	t.Helper()
	var notReady []string
	if !lab.WaitUntil(timeout, func() bool {
		notReady = nil
		for _, n := range c.Nodes {
			if !n.Running() {
				continue
			}
			ctx, cancel := callCtx()
			node, err := c.Admin.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			cancel()
			if err != nil || !nodeReady(node) {
				notReady = append(notReady, n.Name)
			}
		}
		return len(notReady) == 0
	}) {
		c.DumpLogs()
		fatalf(t, "nodes not Ready within %s: %v", timeout, notReady)
	}
}

func nodeReady(n *corev1.Node) bool {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// WaitServing waits until the Deployments are available, every Service
// has its two addresses, and every VIP answers the client: the API VIP,
// the ingress VIP and every Service's, in both families.
func (c *Cluster) WaitServing(t testing.TB, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for _, d := range []struct{ ns, name string }{
		{onnode.Namespace, manifests.AllocatorName},
		{WorkloadNS, EchoName},
		{v1alpha1.DefaultRouterNamespace, RouterName},
	} {
		c.waitDeployment(t, d.ns, d.name, time.Until(deadline))
	}
	for _, u := range c.URLs(t, time.Until(deadline)) {
		var last error
		if !lab.WaitUntil(time.Until(deadline), func() bool { _, last = c.Get(u); return last == nil }) {
			c.DumpLogs()
			fatalf(t, "%s not answering: %v", u, last)
		}
	}
}

// URLs are every VIP's URL the client may ask, waiting up to timeout for
// the Services' addresses.
func (c *Cluster) URLs(t testing.TB, timeout time.Duration) []string {
	t.Helper()
	urls := []string{APIURL(APIVIP4), APIURL(APIVIP6), URL(IngressVIP4, RouterPort), URL(IngressVIP6, RouterPort)}
	for _, s := range Services {
		for _, a := range c.ServiceAddrs(t, s.Name, timeout) {
			urls = append(urls, URL(a, ServicePort))
		}
	}
	return urls
}

// APIURL is the readiness endpoint of the API at vip, as the client asks
// it (through the holder's haproxy).
func APIURL(vip string) string {
	return "https://" + strings.TrimSuffix(strings.TrimPrefix(URL(vip, apiServerPort), "http://"), "/") + "/readyz"
}

// ServiceAddrs waits until the Service has an address of each family
// and returns them.
func (c *Cluster) ServiceAddrs(t testing.TB, name string, timeout time.Duration) []string {
	t.Helper()
	var addrs []string
	if !lab.WaitUntil(timeout, func() bool {
		ctx, cancel := callCtx()
		defer cancel()
		s, err := c.Admin.CoreV1().Services(WorkloadNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		addrs = nil
		for _, in := range s.Status.LoadBalancer.Ingress {
			addrs = append(addrs, in.IP)
		}
		return len(addrs) == 2
	}) {
		c.DumpLogs()
		fatalf(t, "Service %s/%s not given two addresses within %s: %v", WorkloadNS, name, timeout, addrs)
	}
	return addrs
}

func (c *Cluster) waitDeployment(t testing.TB, ns, name string, timeout time.Duration) {
	t.Helper()
	var d *appsv1.Deployment
	if !lab.WaitUntil(timeout, func() bool {
		ctx, cancel := callCtx()
		defer cancel()
		var err error
		d, err = c.Admin.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && d.Spec.Replicas != nil && d.Status.ObservedGeneration >= d.Generation &&
			d.Status.UpdatedReplicas == *d.Spec.Replicas && d.Status.AvailableReplicas == *d.Spec.Replicas && d.Status.Replicas == *d.Spec.Replicas
	}) {
		c.DumpLogs()
		fatalf(t, "Deployment %s/%s not available within %s: %+v", ns, name, timeout, d)
	}
}

// httpClient asks from the client's namespace, a new connection per
// request; TLS unverified (the API VIP's readiness is all it reads).
func (c *Cluster) httpClient(timeout time.Duration) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(c.pki.ca.CertPEM())
	return &http.Client{Timeout: timeout, Transport: &http.Transport{
		DialContext:       c.Client.DialContext,
		DisableKeepAlives: true,
		TLSClientConfig:   &tls.Config{RootCAs: pool},
	}}
}

// Get asks url once from the client (1 s timeout) and returns the body
// of a 200 answer.
func (c *Cluster) Get(url string) (string, error) {
	return probe.Get(context.Background(), c.httpClient(time.Second), url)
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func itoa(i int) string { return strconv.Itoa(i) }
