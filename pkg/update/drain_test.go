package update

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
)

// TestMovedOffUnlisted: a node holding a pool too large to list
// publishes it as a count; a drain waits until it no longer does and
// another node holds the instance, listed or not.
func TestMovedOffUnlisted(t *testing.T) {
	since := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	node := func(name string, h v1alpha1.HeldVIPs) corev1.Node {
		return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{v1alpha1.AnnotationNodeVIPs: h.String()}}}
	}
	pool := v1alpha1.HeldVIPs{{Instance: "pool/big/0", Since: since, Unlisted: 20000}}
	before := v1alpha1.HeldVIPs{{Address: "198.51.100.5", Instance: "api", Since: since}, pool[0]}
	for _, tc := range []struct {
		name  string
		nodes []corev1.Node
		left  string
	}{
		{"nothing moved", []corev1.Node{node("master-0", before), node("master-1", nil)}, "198.51.100.5,20000 unlisted addresses of pool/big/0"},
		{"the pool still here", []corev1.Node{node("master-0", pool), node("master-1", before[:1])}, "20000 unlisted addresses of pool/big/0"},
		{"the pool moved, unlisted", []corev1.Node{node("master-0", nil), node("master-1", before)}, ""},
		{"the pool moved, listed", []corev1.Node{node("master-0", nil), node("master-1", v1alpha1.HeldVIPs{before[0], {Address: "2001:db8:100::1", Instance: "pool/big/0", Since: since}})}, ""},
		{"the pool gone", []corev1.Node{node("master-0", nil), node("master-1", before[:1])}, "20000 unlisted addresses of pool/big/0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			moved, left, err := movedOff(tc.nodes, "master-0", before)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(left, ","); got != tc.left {
				t.Errorf("left %q, want %q", got, tc.left)
			}
			if len(moved)+len(left) != len(before) {
				t.Errorf("moved %v and left %v of %d", moved, left, len(before))
			}
		})
	}
}
