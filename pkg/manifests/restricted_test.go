package manifests

import (
	"path/filepath"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
)

// TestAllocatorRunsRestricted: the allocator Deployment passes the
// restricted Pod Security profile, judged by the admission plugin's own
// policy package, and names no UID. OpenShift's restricted-v2 SCC assigns
// each namespace a UID range (MustRunAsRange) and rejects a pod that
// fixes one outside it, which a fixed runAsUser: 65532 always was.
// exampleObjects is what render writes to manifests/vipctl.yaml and
// manifests/monitoring.yaml for one example.
func exampleObjects(t *testing.T, example string) []runtime.Object {
	t.Helper()
	c, err := v1alpha1.Load(filepath.Join("..", "..", "examples", example))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Objects(c)
	if err != nil {
		t.Fatal(err)
	}
	return append(objs, Monitoring(c)...)
}

func TestAllocatorRunsRestricted(t *testing.T) {
	objs := exampleObjects(t, "compact-ipv4.yaml")
	eval, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, o := range objs {
		d, ok := o.(*appsv1.Deployment)
		if !ok || d.Name != AllocatorName {
			continue
		}
		found = true
		spec := &d.Spec.Template.Spec
		res := policy.AggregateCheckResults(eval.EvaluatePod(api.LevelVersion{Level: api.LevelRestricted, Version: api.LatestVersion()}, &d.Spec.Template.ObjectMeta, spec))
		if !res.Allowed {
			t.Errorf("restricted profile refuses the allocator: %s: %s", res.ForbiddenReason(), res.ForbiddenDetail())
		}
		if sc := spec.SecurityContext; sc == nil || sc.RunAsUser != nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
			t.Errorf("pod securityContext %+v: want runAsNonRoot and no fixed runAsUser", sc)
		}
		for _, ctr := range spec.Containers {
			if ctr.SecurityContext != nil && ctr.SecurityContext.RunAsUser != nil {
				t.Errorf("container %s fixes runAsUser %d", ctr.Name, *ctr.SecurityContext.RunAsUser)
			}
		}
	}
	if !found {
		t.Fatal("no allocator Deployment")
	}
}
