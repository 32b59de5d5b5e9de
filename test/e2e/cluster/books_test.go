package cluster

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/manifests"
	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/test/clusterlab"
	"github.com/vipctl/vipctl/test/lab"
)

// booksReader is the ServiceAccount the test scrapes the allocator's
// /metrics as: allowed to get /metrics and nothing else, as a
// Prometheus is (manifests.Monitoring).
const booksReader = "books-reader"

// allocatorBooks scrapes every allocator replica's /metrics from a
// master's network namespace (the pod network is routed there), as the
// cluster's Prometheus would, and returns the leader's
// vipctl_allocator_addresses_in_use per pool: the allocator's own books.
func allocatorBooks(t *testing.T, c *clusterlab.Cluster, cfg *v1alpha1.ClusterVIPs) map[string]int64 {
	t.Helper()
	ctx := t.Context()
	token := metricsToken(t, c)
	d, err := c.Admin.AppsV1().Deployments(onnode.Namespace).Get(ctx, manifests.AllocatorName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pods, err := c.Admin.CoreV1().Pods(onnode.Namespace).List(ctx, metav1.ListOptions{LabelSelector: labels.Set(d.Spec.Selector.MatchLabels).String()})
	if err != nil {
		t.Fatal(err)
	}
	from := c.Masters()[0].Host
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return from.DialContext(ctx, network, addr)
		},
		// Self-signed without the service CA's Secret, as on a cluster
		// without OpenShift's service CA.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}, //nolint:gosec // see above
	}}
	var seen []string
	for _, p := range pods.Items {
		if p.Status.PodIP == "" || p.Status.Phase != corev1.PodRunning {
			continue
		}
		url := "https://" + net.JoinHostPort(p.Status.PodIP, strconv.Itoa(int(cfg.Spec.MetricsPort()))) + "/metrics"
		// The new binding reaches the apiserver's authorizer within
		// moments; a denial is cached for ten seconds.
		var samples map[string]float64
		var err error
		if !lab.WaitUntil(30*time.Second, func() bool { samples, err = scrapeAllocator(client, url, token); return err == nil }) {
			t.Fatalf("allocator %s: %v", p.Name, err)
		}
		if samples["vipctl_allocator_leader"] != 1 {
			seen = append(seen, p.Name+" (not leading)")
			continue
		}
		books := map[string]int64{}
		for _, pool := range cfg.Spec.ServicePools {
			v, ok := samples[`vipctl_allocator_addresses_in_use{pool="`+pool.Name+`"}`]
			if !ok {
				t.Fatalf("allocator %s: no vipctl_allocator_addresses_in_use for pool %s", p.Name, pool.Name)
			}
			books[pool.Name] = int64(v)
		}
		return books
	}
	t.Fatalf("no allocator replica leads: %v", seen)
	return nil
}

// metricsToken is a token of booksReader, created with its right to get
// /metrics the first time.
func metricsToken(t *testing.T, c *clusterlab.Cluster) string {
	t.Helper()
	ctx := t.Context()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: booksReader, Namespace: metav1.NamespaceDefault}}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: booksReader},
		Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: booksReader},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: booksReader},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: booksReader, Namespace: metav1.NamespaceDefault}}}
	for _, create := range []func() error{
		func() error {
			_, err := c.Admin.CoreV1().ServiceAccounts(sa.Namespace).Create(ctx, sa, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := c.Admin.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := c.Admin.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{})
			return err
		},
	} {
		if err := create(); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	tok, err := c.Admin.CoreV1().ServiceAccounts(sa.Namespace).CreateToken(ctx, booksReader,
		&authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(3600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tok.Status.Token
}

// scrapeAllocator GETs url with token and returns its samples by name
// with labels as the exposition writes them.
func scrapeAllocator(client *http.Client, url, token string) (map[string]float64, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("GET %s: %q: %w", url, line, err)
		}
		out[line[:i]] = v
	}
	return out, sc.Err()
}
