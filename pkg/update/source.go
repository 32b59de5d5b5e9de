package update

import (
	"context"
	"fmt"
	"io"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/apis/v1alpha1/crd"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/configsource"
	"github.com/vipctl/vipctl/pkg/manifests"
)

// Source is the live config and where it is kept: the vipctl-config
// ConfigMap and, once the cluster is migrated (docs/api.md,
// "Migration"), the ClusterVIPs object the sidecars and the allocator
// read instead. A migrated cluster keeps its ConfigMap as a copy, for the
// sidecars of releases before the object was read.
type Source struct {
	Config  *v1alpha1.ClusterVIPs
	Unknown v1alpha1.UnknownFields
	// ConfigMap is nil before the first render's objects are applied.
	ConfigMap *corev1.ConfigMap
	// Object is the ClusterVIPs object when it is the live config.
	Object *unstructured.Unstructured
}

// LiveSource reads the live config: the ClusterVIPs object named as the
// ConfigMap's cluster when it is annotated as the source, else the
// ConfigMap's. A cluster without the CRD, or a caller not allowed to
// read it, reads the ConfigMap alone.
func (c Cluster) LiveSource(ctx context.Context) (Source, error) {
	cfg, unknown, cm, err := c.LiveStored(ctx)
	if err != nil || cfg == nil || c.Dynamic == nil {
		return Source{Config: cfg, Unknown: unknown, ConfigMap: cm}, err
	}
	s := Source{Config: cfg, Unknown: unknown, ConfigMap: cm}
	obj, err := c.Dynamic.Resource(crd.Resource).Get(ctx, cfg.Metadata.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
		return s, nil
	}
	if err != nil {
		return s, fmt.Errorf("reading ClusterVIPs %s: %w", cfg.Metadata.Name, err)
	}
	live, ok, err := configsource.ReadSource(obj)
	if !ok {
		return s, nil
	}
	s.Config = live
	if err != nil {
		return s, err
	}
	s.Unknown, s.Object = nil, obj
	return s, nil
}

// writeObject writes desired's spec into the source object, with the
// resourceVersion it was read at: a concurrent edit (`oc edit`, another
// update) fails instead of being overwritten.
func (c Cluster) writeObject(ctx context.Context, desired *v1alpha1.ClusterVIPs, obj *unstructured.Unstructured, out io.Writer) error {
	spec, err := manifests.ClusterVIPsSpec(desired)
	if err != nil {
		return err
	}
	if err := c.updateObject(ctx, obj, func(next *unstructured.Unstructured) { next.Object["spec"] = spec }); err != nil {
		if apierrors.IsConflict(err) {
			return fmt.Errorf("ClusterVIPs %s changed since it was read (oc edit, another update?): nothing written; run vipctl update again: %w", obj.GetName(), err)
		}
		return fmt.Errorf("writing ClusterVIPs %s: %w", obj.GetName(), err)
	}
	_, _ = fmt.Fprintf(out, "wrote ClusterVIPs %s\n", obj.GetName())
	return nil
}

// updateObject writes read with edit applied, with read's
// resourceVersion. The allocator writes the status often, and each status
// write moves the object's resourceVersion: a conflict while the spec
// (its generation) and the annotations are still as read is retried on
// the newer object; any other change is the conflict it is.
func (c Cluster) updateObject(ctx context.Context, read *unstructured.Unstructured, edit func(*unstructured.Unstructured)) error {
	r := c.Dynamic.Resource(crd.Resource)
	cur := read
	for range 5 {
		next := cur.DeepCopy()
		edit(next)
		_, err := r.Update(ctx, next, metav1.UpdateOptions{FieldValidation: metav1.FieldValidationStrict})
		if !apierrors.IsConflict(err) {
			return err
		}
		latest, gerr := r.Get(ctx, read.GetName(), metav1.GetOptions{})
		if gerr != nil || latest.GetGeneration() != read.GetGeneration() || !maps.Equal(latest.GetAnnotations(), read.GetAnnotations()) {
			return err
		}
		cur = latest
	}
	return fmt.Errorf("ClusterVIPs %s: its status kept changing under five writes", read.GetName())
}

// mirrorStale tells whether the ConfigMap's copy of a migrated cluster's
// config differs from desired.
func mirrorStale(cm *corev1.ConfigMap, desired *v1alpha1.ClusterVIPs) bool {
	if cm == nil {
		return true
	}
	have, err := cluster.ParseConfigMap(cm)
	if err != nil {
		return true
	}
	a, err1 := have.ShippedYAML()
	b, err2 := desired.ShippedYAML()
	return err1 != nil || err2 != nil || string(a) != string(b)
}
