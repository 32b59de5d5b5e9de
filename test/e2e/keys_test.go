package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/status"
	"github.com/vipctl/vipctl/test/lab"
	"github.com/vipctl/vipctl/test/testapiserver"
)

// documentedKey matches the instance key forms the docs name
// (docs/vr-ids.md, docs/runtimecfg.md, the config reference).
var documentedKey = regexp.MustCompile(`^(api|api-int|ingress|ingress/[a-z0-9.-]+|pool/[a-z0-9.-]+/[0-9]+|service/[a-z0-9.-]+/[a-z0-9.-]+)$`)

// wantKeysAgree waits until every node publishes the VIPs in want, then
// holds `vipctl status` (the real command, admin kubeconfig), the Nodes'
// vipctl.io/vips annotations and `vipctl vr-ids` against each other: every
// held VIP's row names the instance key its holder published, and that key
// is one vr-ids lists for the cluster and one of the forms the docs name.
func wantKeysAgree(t *testing.T, kc *lab.KubeCluster, want map[string]v1alpha1.InstanceKey) {
	t.Helper()
	ctx := context.Background()
	published := map[string]v1alpha1.InstanceKey{}
	ok := lab.WaitUntil(30*time.Second, func() bool {
		nodes, err := kc.Admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		published = map[string]v1alpha1.InstanceKey{}
		for _, n := range nodes.Items {
			held, err := v1alpha1.ParseHeldVIPs(n.Annotations[v1alpha1.AnnotationNodeVIPs])
			if err != nil {
				t.Fatalf("node %s: %v", n.Name, err)
			}
			for _, h := range held {
				published[h.Address] = h.Instance
			}
		}
		for a, k := range want {
			if published[a] != k {
				return false
			}
		}
		return true
	})
	if !ok {
		t.Fatalf("the nodes publish %v; want at least %v", published, want)
	}

	kubeconfig := filepath.Join(t.TempDir(), "admin.kubeconfig")
	testapiserver.WriteKubeconfig(t, kc.API.AdminConfig(), kubeconfig)
	_, out, errOut := vipctl(t, "status", "-f", kc.ConfigPath, "-o", "json", "--kubeconfig", kubeconfig)
	var report status.Report
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatalf("vipctl status -o json: %v\n%s%s", err, out, errOut)
	}
	code, ids, errOut := vipctl(t, "vr-ids", "-f", kc.ConfigPath, "-o", "json")
	if code != 0 {
		t.Fatalf("vipctl vr-ids: %d\n%s%s", code, ids, errOut)
	}
	seen := 0
	for _, r := range report.VIPs {
		if !documentedKey.MatchString(r.Instance) {
			t.Errorf("status names %s's instance %q, a form the docs do not name", r.Address, r.Instance)
		}
		if k, ok := published[r.Address]; ok {
			seen++
			if string(k) != r.Instance {
				t.Errorf("%s: status says instance %q, its holder published %q", r.Address, r.Instance, k)
			}
		}
		if strings.HasPrefix(r.Instance, "service/") {
			continue // derived at run time from the Service; vr-ids reads the file only
		}
		if !strings.Contains(ids, `"key": "`+r.Instance+`"`) {
			t.Errorf("status names instance %q, which vr-ids does not list:\n%s", r.Instance, ids)
		}
	}
	if seen < len(want) {
		t.Errorf("status shows %d of the %d published VIPs:\n%s", seen, len(want), out)
	}
	for _, doc := range []string{"docs/vr-ids.md", "docs/status.md"} {
		data, err := os.ReadFile(filepath.Join("..", "..", doc))
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range want {
			form := keyForm(k)
			if !strings.Contains(string(data), form) {
				t.Errorf("%s does not name the key form %s (of %s)", doc, form, k)
			}
		}
	}
}

// keyForm is how the docs write a key's kind: pool/web/1 is pool/<name>/<n>.
func keyForm(k v1alpha1.InstanceKey) string {
	switch parts := strings.Split(string(k), "/"); {
	case parts[0] == "pool":
		return "pool/<name>/<n>"
	case parts[0] == "service":
		return "service/<namespace>/<name>"
	case len(parts) == 2:
		return "ingress/<name>"
	default:
		return string(k)
	}
}
