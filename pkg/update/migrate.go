package update

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/apis/v1alpha1/crd"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/manifests"
)

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// MigrateOptions configure Migrate.
type MigrateOptions struct {
	// Revert hands the live config back to the ConfigMap.
	Revert bool
	// Wait bounds the wait for every node to follow (0: do not wait);
	// Poll is how often the object's status is read meanwhile.
	Wait, Poll time.Duration
	Log        io.Writer
}

// Migrate makes the cluster's ClusterVIPs object the live config the
// sidecars and the allocator read (docs/api.md, "Migration"): it
// installs the CRD when the cluster lacks it, writes the object with the
// ConfigMap's config (so nothing changes on any node) and the
// vipctl.io/config-source annotation, then waits until the object's
// status says every node reads it. With Revert it removes the annotation
// and waits until every node reads the ConfigMap again.
func (c Cluster) Migrate(ctx context.Context, o MigrateOptions) error {
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	src, err := c.LiveSource(ctx)
	if err != nil {
		return fmt.Errorf("reading the live config: %w", err)
	}
	if src.Config == nil {
		return fmt.Errorf("no ConfigMap %s/%s: apply the manifests vipctl render wrote first", c.Namespace, v1alpha1.ConfigMapName)
	}
	if len(src.Unknown) > 0 {
		return NewerFieldsError(src.ConfigMap, src.Unknown)
	}
	name := src.Config.Metadata.Name
	want := v1alpha1.SourceObject
	if o.Revert {
		want = v1alpha1.SourceConfigMap
		if src.Object == nil {
			_, _ = fmt.Fprintf(o.Log, "the ConfigMap %s/%s is the live config already\n", c.Namespace, v1alpha1.ConfigMapName)
		} else if err := c.unmarkSource(ctx, src.Object, o.Log); err != nil {
			return err
		}
		if err := c.markConfigMap(ctx, false); err != nil {
			return err
		}
	} else {
		if err := c.noSidecarBeforeObjects(ctx); err != nil {
			return err
		}
		if err := c.ensureCRD(ctx, o.Log); err != nil {
			return err
		}
		if err := c.writeSourceObject(ctx, src, o.Log); err != nil {
			return err
		}
		// The sidecars and the allocator watch the ConfigMap: marked,
		// they look for the object at once, not at their next probe.
		if err := c.markConfigMap(ctx, true); err != nil {
			return err
		}
	}
	if o.Wait <= 0 {
		return nil
	}
	return c.waitNodesOn(ctx, name, want, o)
}

// noSidecarBeforeObjects refuses a migration, before anything is
// written, while a node runs a sidecar older than v0.2.0: it publishes
// what it holds (AnnotationNodeVIPs) and never where it reads its config
// (AnnotationNodeConfig), and it reads only the ConfigMap, so an edit of
// the object alone would never reach it (docs/api.md, "Migration").
func (c Cluster) noSidecarBeforeObjects(ctx context.Context) error {
	nodes, err := c.Nodes(ctx)
	if err != nil {
		return fmt.Errorf("listing the Nodes: %w", err)
	}
	var older []string
	for _, n := range nodes {
		_, vips := n.Annotations[v1alpha1.AnnotationNodeVIPs]
		_, applied := n.Annotations[v1alpha1.AnnotationNodeConfig]
		if vips && !applied {
			older = append(older, n.Name)
		}
	}
	if len(older) == 0 {
		return nil
	}
	sort.Strings(older)
	return fmt.Errorf("node(s) %s run a vipctl sidecar older than v0.2.0 (it publishes %s, never %s): it reads only the ConfigMap %s/%s, so an edit of the ClusterVIPs object alone would never reach it; finish the upgrade on every node (docs/upgrade.md), then migrate; nothing was changed",
		cluster.SomeOf(older, 5), v1alpha1.AnnotationNodeVIPs, v1alpha1.AnnotationNodeConfig, c.Namespace, v1alpha1.ConfigMapName)
}

// ensureCRD creates the ClusterVIPs CRD when the cluster lacks it and
// waits until it is established.
func (c Cluster) ensureCRD(ctx context.Context, out io.Writer) error {
	obj, err := clusterVIPsCRD()
	if err != nil {
		return err
	}
	r := c.Dynamic.Resource(crdResource)
	if _, err := r.Get(ctx, obj.GetName(), metav1.GetOptions{}); apierrors.IsNotFound(err) {
		if _, err := r.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating CustomResourceDefinition %s: %w", obj.GetName(), err)
		}
		_, _ = fmt.Fprintf(out, "created CustomResourceDefinition %s\n", obj.GetName())
	} else if err != nil {
		return fmt.Errorf("reading CustomResourceDefinition %s: %w", obj.GetName(), err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		got, err := r.Get(ctx, obj.GetName(), metav1.GetOptions{})
		if err == nil && established(got) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("CustomResourceDefinition %s not established after 30s: %v", obj.GetName(), err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func established(u *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// createServed runs create, and again while the apiserver that answers
// does not serve the resource yet (404, "the server could not find the
// requested resource"), for up to schemaDelay. A CRD is established as
// one apiserver sees it; behind the API VIP the next request may reach
// another, which installs the new resource a moment later (the cluster
// lab's three apiservers: `vipctl migrate` failed so once, 2026-11-30).
func createServed(ctx context.Context, create func() error) error {
	return retryForSchema(ctx, apierrors.IsNotFound, create)
}

// writeSourceObject writes the object with the ConfigMap's config and the
// source annotation: created, or (an object applied before, which no
// node read) its spec replaced.
func (c Cluster) writeSourceObject(ctx context.Context, src Source, out io.Writer) error {
	want, err := manifests.SourceObject(src.Config)
	if err != nil {
		return err
	}
	name := src.Config.Metadata.Name
	r := c.Dynamic.Resource(crd.Resource)
	obj, err := r.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		if err := createServed(ctx, func() error {
			_, err := r.Create(ctx, want, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict})
			return err
		}); err != nil {
			return fmt.Errorf("creating ClusterVIPs %s: %w", name, err)
		}
		_, _ = fmt.Fprintf(out, "created ClusterVIPs %s from ConfigMap %s/%s: it is the live config now\n", name, c.Namespace, v1alpha1.ConfigMapName)
		return nil
	case err != nil:
		return fmt.Errorf("reading ClusterVIPs %s: %w", name, err)
	}
	if src.Object != nil {
		_, _ = fmt.Fprintf(out, "ClusterVIPs %s is the live config already\n", name)
		return nil
	}
	if err := c.updateObject(ctx, obj, func(next *unstructured.Unstructured) {
		next.Object["spec"] = want.Object["spec"]
		setSource(next, true)
	}); err != nil {
		return fmt.Errorf("writing ClusterVIPs %s: %w", name, err)
	}
	_, _ = fmt.Fprintf(out, "wrote ClusterVIPs %s with ConfigMap %s/%s's config (its spec before was only reported on): it is the live config now\n", name, c.Namespace, v1alpha1.ConfigMapName)
	return nil
}

// markConfigMap sets (on) or removes the ConfigMap's
// AnnotationConfigSource, which tells its readers to look for the object.
func (c Cluster) markConfigMap(ctx context.Context, on bool) error {
	value := "null"
	if on {
		value = strconv.Quote(v1alpha1.SourceObject)
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%s}}}`, v1alpha1.AnnotationConfigSource, value)
	if _, err := c.Kube.CoreV1().ConfigMaps(c.Namespace).Patch(ctx, v1alpha1.ConfigMapName, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("marking ConfigMap %s/%s: %w", c.Namespace, v1alpha1.ConfigMapName, err)
	}
	return nil
}

// setSource sets (on) or removes u's AnnotationConfigSource.
func setSource(u *unstructured.Unstructured, on bool) {
	ann := u.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	if on {
		ann[v1alpha1.AnnotationConfigSource] = "true"
	} else {
		delete(ann, v1alpha1.AnnotationConfigSource)
	}
	u.SetAnnotations(ann)
}

// unmarkSource removes the object's source annotation: the ConfigMap is
// the live config again.
func (c Cluster) unmarkSource(ctx context.Context, obj *unstructured.Unstructured, out io.Writer) error {
	if err := c.updateObject(ctx, obj, func(next *unstructured.Unstructured) { setSource(next, false) }); err != nil {
		return fmt.Errorf("writing ClusterVIPs %s: %w", obj.GetName(), err)
	}
	_, _ = fmt.Fprintf(out, "ConfigMap %s/%s is the live config again (ClusterVIPs %s is only reported on)\n", c.Namespace, v1alpha1.ConfigMapName, obj.GetName())
	return nil
}

// waitNodesOn waits until the object's status lists every node reading
// source, on the object's current spec.
func (c Cluster) waitNodesOn(ctx context.Context, name, source string, o MigrateOptions) error {
	deadline := time.Now().Add(o.Wait)
	last := ""
	for {
		behind, total, err := c.nodesNotOn(ctx, name, source)
		if err == nil && total > 0 && len(behind) == 0 {
			_, _ = fmt.Fprintf(o.Log, "every node (%d) reads the %s\n", total, sourceName(source))
			return nil
		}
		msg := fmt.Sprint(err)
		if err == nil {
			msg = fmt.Sprintf("%d of %d node(s) not reading the %s yet: %s", len(behind), total, sourceName(source), strings.Join(behind, ", "))
			if total == 0 {
				msg = "no node in the object's status yet (the allocator's leader writes it)"
			}
		}
		if msg != last {
			_, _ = fmt.Fprintln(o.Log, msg)
			last = msg
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %s: %s; sidecars before v0.2.0 read only the ConfigMap, which stays a copy of the object (docs/api.md, \"Migration\")", o.Wait, msg)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(o.Poll):
		}
	}
}

func sourceName(source string) string {
	if source == v1alpha1.SourceObject {
		return "ClusterVIPs object"
	}
	return "ConfigMap"
}

// nodesNotOn names the nodes of the object's status that do not read
// source or run another spec than the object's current one.
func (c Cluster) nodesNotOn(ctx context.Context, name, source string) (behind []string, total int, err error) {
	u, err := c.Dynamic.Resource(crd.Resource).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, 0, err
	}
	obj, err := crd.FromUnstructured(u)
	if err != nil {
		return nil, 0, err
	}
	if obj.Status.ObservedGeneration != obj.Generation {
		return nil, 0, fmt.Errorf("the status is of generation %d, the object at %d", obj.Status.ObservedGeneration, obj.Generation)
	}
	for _, n := range obj.Status.Nodes {
		if n.Source != source || n.SpecDigest != obj.Status.SpecDigest {
			src := n.Source
			if src == "" {
				src = "no digest published"
			}
			behind = append(behind, n.Name+" ("+src+")")
		}
	}
	sort.Strings(behind)
	return behind, len(obj.Status.Nodes), nil
}
