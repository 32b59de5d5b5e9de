package manifests

import (
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/test/fixture"
)

// TestNodeReadersBGPPasswords: the nodes may get the Secrets the BGP
// peers name for their passwords, by name, and nothing more of the
// namespace's Secrets (no list, no watch, no other name); without a
// passwordSecret they get no Secret at all.
func TestNodeReadersBGPPasswords(t *testing.T) {
	t.Parallel()
	secretRules := func(c *v1alpha1.ClusterVIPs) []rbacv1.PolicyRule {
		var out []rbacv1.PolicyRule
		for _, o := range NodeReaders(c) {
			role, ok := o.(*rbacv1.Role)
			if !ok {
				if cr, ok := o.(*rbacv1.ClusterRole); ok && slices.ContainsFunc(cr.Rules, func(r rbacv1.PolicyRule) bool { return slices.Contains(r.Resources, "secrets") }) {
					t.Errorf("ClusterRole %s grants secrets", cr.Name)
				}
				continue
			}
			for _, r := range role.Rules {
				if slices.Contains(r.Resources, "secrets") {
					if role.Namespace != onnode.Namespace {
						t.Errorf("Role %s/%s grants secrets", role.Namespace, role.Name)
					}
					out = append(out, r)
				}
			}
		}
		return out
	}
	c := fixture.Example(t, "bgp-two-racks.yaml")
	if got := secretRules(c); len(got) != 0 {
		t.Errorf("no passwordSecret: secret rules %+v, want none", got)
	}
	c.Spec.BGP.Peers[0].PasswordSecret = "rack-a"
	got := secretRules(c)
	if len(got) != 1 || !slices.Equal(got[0].Verbs, []string{"get"}) || !slices.Equal(got[0].ResourceNames, []string{"rack-a"}) {
		t.Errorf("secret rules %+v, want get on rack-a alone", got)
	}
}
