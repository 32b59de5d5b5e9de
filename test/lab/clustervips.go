package lab

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1/crd"
	"github.com/vipctl/vipctl/pkg/manifests"
	"github.com/vipctl/vipctl/test/fixture"
	"github.com/vipctl/vipctl/test/testapiserver"
)

// CreateClusterVIPs installs the ClusterVIPs CRD and creates the object
// of clusterYAML (a cluster file, as `oc apply -f cluster.yaml` would).
func CreateClusterVIPs(t testing.TB, cfg *rest.Config, clusterYAML string) {
	t.Helper()
	testapiserver.InstallCRDsAt(t, cfg, fixture.Repo(manifests.ClusterVIPsCRDPath))
	var obj unstructured.Unstructured
	if err := yaml.Unmarshal([]byte(clusterYAML), &obj.Object); err != nil {
		t.Fatal(err)
	}
	if _, err := dynamic.NewForConfigOrDie(cfg).Resource(crd.Resource).Create(context.Background(), &obj,
		metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict}); err != nil {
		t.Fatalf("creating the ClusterVIPs object: %v", err)
	}
}

// ClusterVIPs reads the ClusterVIPs object name.
func ClusterVIPs(t testing.TB, cfg *rest.Config, name string) *crd.ClusterVIPs {
	t.Helper()
	u, err := dynamic.NewForConfigOrDie(cfg).Resource(crd.Resource).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	obj, err := crd.FromUnstructured(u)
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

// WaitClusterVIPsStatus waits up to 30 s for the status of the ClusterVIPs
// object name to satisfy ok, and names the last one seen if it does not.
func WaitClusterVIPsStatus(t testing.TB, cfg *rest.Config, name, what string, ok func(crd.ClusterVIPsStatus) bool) crd.ClusterVIPsStatus {
	t.Helper()
	var last crd.ClusterVIPsStatus
	if !WaitUntil(30*time.Second, func() bool {
		last = ClusterVIPs(t, cfg, name).Status
		return ok(last)
	}) {
		t.Fatalf("timed out after 30s waiting for %s in the ClusterVIPs status; the last: %+v", what, last)
	}
	return last
}

// VIPStatus is the status of the VIP addr in s, zero when s has none.
func VIPStatus(s crd.ClusterVIPsStatus, addr string) crd.VIPStatus {
	for _, v := range s.VIPs {
		if v.Address == addr {
			return v
		}
	}
	return crd.VIPStatus{}
}

// StatusHolder is the node s names addr's holder, "" when none.
func StatusHolder(s crd.ClusterVIPsStatus, addr string) string { return VIPStatus(s, addr).Holder }
