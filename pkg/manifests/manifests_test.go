package manifests

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/test/golden"
)

// TestManifestsGolden pins what `vipctl render` writes to
// DIR/manifests/vipctl.yaml for every example.
func TestManifestsGolden(t *testing.T) {
	examples, err := filepath.Glob(filepath.Join("..", "..", "examples", "*.yaml"))
	if err != nil || len(examples) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	for _, ex := range examples {
		c, err := v1alpha1.Load(ex)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := Objects(c)
		if err != nil {
			t.Fatal(err)
		}
		data, err := Marshal(objs)
		if err != nil {
			t.Fatal(err)
		}
		golden.Assert(t, strings.TrimSuffix(filepath.Base(ex), ".yaml"), data)
	}
}

// TestRBACIsNarrow: no wildcard, no write for the node group, and the
// allocator writes only Service status, the ClusterVIPs status, Events and
// its Lease, and creates
// only the reviews that check a scraper of its /metrics.
func TestRBACIsNarrow(t *testing.T) {
	objs := exampleObjects(t, "ingress-shards.yaml")
	writes := map[string]bool{"create": true, "update": true, "patch": true, "delete": true, "deletecollection": true}
	for _, o := range objs {
		var name string
		var rules []rbacv1.PolicyRule
		switch r := o.(type) {
		case *rbacv1.ClusterRole:
			name, rules = "ClusterRole/"+r.Name, r.Rules
		case *rbacv1.Role:
			name, rules = "Role/"+r.Namespace+"/"+r.Name, r.Rules
		default:
			continue
		}
		for _, rule := range rules {
			for _, list := range [][]string{rule.Verbs, rule.Resources, rule.APIGroups, rule.NonResourceURLs} {
				if slices.Contains(list, "*") {
					t.Errorf("%s: wildcard in %+v", name, rule)
				}
			}
			for _, v := range rule.Verbs {
				if !writes[v] {
					continue
				}
				if strings.Contains(name, NodeReaderName) {
					t.Errorf("%s grants the nodes %s on %v", name, v, rule.Resources)
				}
				ok := slices.Equal(rule.Resources, []string{"services/status"}) || slices.Equal(rule.Resources, []string{"clustervips/status"}) || slices.Equal(rule.Resources, []string{"events"}) || slices.Equal(rule.Resources, []string{"leases"}) ||
					(v == "create" && (slices.Equal(rule.Resources, []string{"tokenreviews"}) || slices.Equal(rule.Resources, []string{"subjectaccessreviews"})))
				if !ok {
					t.Errorf("%s: write %s on %v", name, v, rule.Resources)
				}
			}
		}
	}
}
