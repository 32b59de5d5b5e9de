package update

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
)

// SetDrain asks a node's sidecar to drain it (or to end that drain) by
// setting (removing) cluster.DrainAnnotation on its Node: the sidecar then
// gives every VIP away make-before-break, as keepalived's preStop does,
// and keeps it that way across its own restarts until the undrain.
func (c Cluster) SetDrain(ctx context.Context, node string, drain bool) error {
	var value any // JSON null removes the annotation in a merge patch
	if drain {
		value = "true"
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{cluster.DrainAnnotation: value}}})
	if err != nil {
		return err
	}
	_, err = c.Kube.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("node %s: no such Node", node)
	}
	return err
}

// Moved is a VIP a drain took off a node, and where it went.
type Moved struct {
	v1alpha1.HeldVIP
	// To are the nodes that publish it now.
	To []string
}

func (m Moved) String() string {
	return fmt.Sprintf("%s (%s) to %s", heldLabel(m.HeldVIP), m.Instance, strings.Join(m.To, ", "))
}

// ErrDrainTimeout is DrainAndWait's error when the VIPs did not all move
// in time.
var ErrDrainTimeout = errors.New("drain not done")

// DrainAndWait drains node (SetDrain) and waits, up to timeout, until
// the VIPs it held, as its sidecar published them in the vipctl.io/vips
// annotation `vipctl status` reads, have all moved: the node publishes
// none of them any more and another node publishes each. Addresses of
// bgp pools are not waited for: every eligible node announces them.
// Progress goes to log; every poll interval the Nodes are read again.
func (c Cluster) DrainAndWait(ctx context.Context, node string, timeout, poll time.Duration, log io.Writer) ([]Moved, error) {
	nodes, err := c.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	before, err := vrrpHeld(nodes, node)
	if err != nil {
		return nil, err
	}
	if err := c.SetDrain(ctx, node, true); err != nil {
		return nil, err
	}
	if len(before) == 0 {
		return nil, nil
	}
	addrs := make([]string, len(before))
	for i, h := range before {
		addrs[i] = heldLabel(h)
	}
	_, _ = fmt.Fprintf(log, "node %s: waiting up to %s for its sidecar to hand over %s\n", node, timeout, cluster.SomeOf(addrs, drainShown))
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var left []string
	for {
		nodes, err := c.Nodes(ctx)
		if err == nil {
			var moved []Moved
			moved, left, err = movedOff(nodes, node, before)
			if err != nil {
				return nil, err
			}
			if len(left) == 0 {
				return moved, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: after %s node %s still holds %s, or no other node does (is its sidecar running? vipctl status shows the holders; vipctl undrain %s ends the drain)",
				ErrDrainTimeout, timeout, node, cluster.SomeOf(left, drainShown), node)
		case <-time.After(poll):
		}
	}
}

// published is every node's vipctl.io/vips annotation, by node.
func published(nodes []corev1.Node) (map[string]v1alpha1.HeldVIPs, error) {
	out := map[string]v1alpha1.HeldVIPs{}
	for _, n := range nodes {
		held, err := v1alpha1.ParseHeldVIPs(n.Annotations[v1alpha1.AnnotationNodeVIPs])
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", n.Name, err)
		}
		out[n.Name] = held
	}
	return out, nil
}

// vrrpHeld is what node publishes it holds, bgp pools' addresses aside.
func vrrpHeld(nodes []corev1.Node, node string) (v1alpha1.HeldVIPs, error) {
	if !slices.ContainsFunc(nodes, func(n corev1.Node) bool { return n.Name == node }) {
		return nil, fmt.Errorf("node %s: no such Node", node)
	}
	all, err := published(nodes)
	if err != nil {
		return nil, err
	}
	var out v1alpha1.HeldVIPs
	for _, h := range all[node] {
		if _, bgp := h.Instance.BGPPool(); !bgp {
			out = append(out, h)
		}
	}
	return out, nil
}

// movedOff tells where each of before went; left are the addresses node
// still publishes or nobody else does.
func movedOff(nodes []corev1.Node, node string, before v1alpha1.HeldVIPs) (moved []Moved, left []string, err error) {
	all, err := published(nodes)
	if err != nil {
		return nil, nil, err
	}
	// What each node publishes: its addresses and the instances it
	// lists addresses of, and the instances it holds unlisted (a list
	// too long to publish), all of whose addresses it holds.
	type holds struct{ addrs, unlisted, listed map[string]bool }
	by := map[string]holds{}
	for name, held := range all {
		h := holds{map[string]bool{}, map[string]bool{}, map[string]bool{}}
		for _, o := range held {
			if o.Unlisted > 0 {
				h.unlisted[string(o.Instance)] = true
			} else {
				h.addrs[o.Address] = true
				h.listed[string(o.Instance)] = true
			}
		}
		by[name] = h
	}
	for _, h := range before {
		m := Moved{HeldVIP: h}
		for name, o := range by {
			if o.unlisted[string(h.Instance)] || (h.Unlisted == 0 && o.addrs[h.Address]) || (h.Unlisted > 0 && o.listed[string(h.Instance)]) {
				m.To = append(m.To, name)
			}
		}
		sort.Strings(m.To)
		if len(m.To) == 0 || slices.Contains(m.To, node) {
			left = append(left, heldLabel(h))
			continue
		}
		moved = append(moved, m)
	}
	return moved, left, nil
}

// drainShown is how many addresses a drain's lines name before they
// count the rest: a node holding a pool of thousands would otherwise
// print every address on one line.
const drainShown = 10

// heldLabel names a published entry: its address, or for an unlisted
// one how many of which instance.
func heldLabel(h v1alpha1.HeldVIP) string {
	if h.Unlisted > 0 {
		return fmt.Sprintf("%d unlisted addresses of %s", h.Unlisted, h.Instance)
	}
	return h.Address
}
