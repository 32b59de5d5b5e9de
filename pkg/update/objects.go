package update

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/bundle"
	"github.com/vipctl/vipctl/pkg/manifests"
)

// FieldManager owns the fields `vipctl update` applies server-side.
const FieldManager = "vipctl"

// ObjectChange is one object `vipctl render` writes to
// manifests/vipctl.yaml or manifests/monitoring.yaml that the live cluster
// lacks or has otherwise: the
// allocator's Deployment on an old image after spec.images changed, a
// node reader Role for a new router namespace, an object deleted by hand.
// The vipctl ConfigMap is not one: the plan writes it itself.
type ObjectChange struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// Change is added or changed.
	Change string `json:"change"`
	// Fields are the changed fields, as the server-side apply would
	// change them: "path: old -> new".
	Fields []string `json:"fields,omitempty"`

	resource schema.GroupVersionResource
	// applied is what is applied: the rendered object, with the
	// resourceVersion it was read at when it exists.
	applied *unstructured.Unstructured
}

func (o ObjectChange) String() string {
	if o.Namespace == "" {
		return o.Kind + " " + o.Name
	}
	return o.Kind + " " + o.Namespace + "/" + o.Name
}

// rendered is one object of manifests/vipctl.yaml or
// manifests/monitoring.yaml, ready to apply.
type rendered struct {
	resource schema.GroupVersionResource
	obj      *unstructured.Unstructured
	// file is the file of `vipctl render` that holds it.
	file string
	// ifPresent: only brought up to date, never added (the ClusterVIPs
	// CRD: a cluster that has not taken the API on stays without it).
	ifPresent bool
}

func (r rendered) String() string {
	return ObjectChange{Kind: r.obj.GetKind(), Namespace: r.obj.GetNamespace(), Name: r.obj.GetName()}.String()
}

// renderedObjects are the objects of bundle.ManifestsPath, then those of
// bundle.MonitoringPath (none for stack none), for desired, in apply
// order, without the vipctl ConfigMap; the Namespace both files hold
// once.
func renderedObjects(desired *v1alpha1.ClusterVIPs) ([]rendered, error) {
	objs, err := manifests.Objects(desired)
	if err != nil {
		return nil, err
	}
	fileOf := map[runtime.Object]string{}
	for _, o := range objs {
		fileOf[o] = bundle.ManifestsPath
	}
	for _, o := range manifests.Monitoring(desired) {
		fileOf[o] = bundle.MonitoringPath
		objs = append(objs, o)
	}
	var out []rendered
	seen := map[string]bool{}
	for _, o := range objs {
		if cm, ok := o.(*corev1.ConfigMap); ok && cm.Name == v1alpha1.ConfigMapName {
			continue
		}
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			return nil, err
		}
		obj := &unstructured.Unstructured{Object: u}
		key := obj.GetAPIVersion() + "/" + obj.GetKind() + "/" + obj.GetNamespace() + "/" + obj.GetName()
		if seen[key] {
			continue
		}
		seen[key] = true
		// Fields the server sets: applying them would claim them.
		unstructured.RemoveNestedField(obj.Object, "metadata", "creationTimestamp")
		unstructured.RemoveNestedField(obj.Object, "status")
		// Every kind pkg/manifests writes has the regular plural.
		gvr, _ := meta.UnsafeGuessKindToResource(obj.GroupVersionKind())
		out = append(out, rendered{resource: gvr, obj: obj, file: fileOf[o]})
	}
	crd, err := clusterVIPsCRD()
	if err != nil {
		return nil, err
	}
	return append(out, rendered{resource: crdResource, obj: crd, file: bundle.ClusterVIPsCRDPath, ifPresent: true}), nil
}

// clusterVIPsCRD is this release's ClusterVIPs CRD: a cluster on the
// object needs its schema to keep the fields this release writes (the
// apiserver prunes the fields its CRD does not know).
func clusterVIPsCRD() (*unstructured.Unstructured, error) {
	var obj unstructured.Unstructured
	if err := yaml.Unmarshal(manifests.ClusterVIPsCRD(), &obj.Object); err != nil {
		return nil, err
	}
	unstructured.RemoveNestedField(obj.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(obj.Object, "status")
	return &obj, nil
}

func (c Cluster) resource(r rendered) dynamic.ResourceInterface {
	ri := c.Dynamic.Resource(r.resource)
	if ns := r.obj.GetNamespace(); ns != "" {
		return ri.Namespace(ns)
	}
	return ri
}

// Skipped are the rendered objects ObjectChanges leaves as they are.
type Skipped struct {
	// Unreachable may not be read or applied by this user: someone who
	// may applies the files named (Warning).
	Unreachable []rendered
	// Unplaced have no place in the cluster: a kind it does not serve
	// (ServiceMonitor and PrometheusRule without prometheus-operator), or
	// a namespace that does not exist (the console's dashboard off
	// OpenShift); by why.
	Unplaced map[string][]string
}

// Warning says what to do about objects update may not touch.
func (s Skipped) Warning() string {
	if len(s.Unreachable) == 0 {
		return ""
	}
	var names, files []string
	for _, r := range s.Unreachable {
		names = append(names, r.String())
		if !slices.Contains(files, r.file) {
			files = append(files, r.file)
		}
	}
	return fmt.Sprintf("%s: not allowed to read or apply, left as they are; apply %s of `vipctl render` as a user who may (docs/update.md)",
		strings.Join(names, ", "), strings.Join(files, " and "))
}

// Note says what was left out for having no place in the cluster.
func (s Skipped) Note() string {
	if len(s.Unplaced) == 0 {
		return ""
	}
	var parts []string
	for _, why := range slices.Sorted(maps.Keys(s.Unplaced)) {
		parts = append(parts, strings.Join(s.Unplaced[why], ", ")+" ("+why+")")
	}
	return "left out, the cluster has no place for them: " + strings.Join(parts, "; ") +
		"; install what serves them, or set spec.monitoring.stack to the cluster's (docs/monitoring.md)"
}

// ObjectChanges compares every object of manifests/vipctl.yaml and
// manifests/monitoring.yaml for desired (but the vipctl ConfigMap), and
// the ClusterVIPs CRD where the cluster has it, with the live one, through a server-side dry-run apply, so only what
// applying would really change shows. An object that cannot be read or
// applied for lack of permission, or that has no place in the cluster, is
// named in skipped.
func (c Cluster) ObjectChanges(ctx context.Context, desired *v1alpha1.ClusterVIPs) (changes []ObjectChange, skipped Skipped, err error) {
	if c.Dynamic == nil {
		return nil, skipped, nil
	}
	objs, err := renderedObjects(desired)
	if err != nil {
		return nil, skipped, err
	}
	place := c.placer(objs)
	for _, r := range objs {
		ch := ObjectChange{Kind: r.obj.GetKind(), Namespace: r.obj.GetNamespace(), Name: r.obj.GetName(), resource: r.resource, applied: r.obj}
		if why := place(ctx, r); why != "" {
			if skipped.Unplaced == nil {
				skipped.Unplaced = map[string][]string{}
			}
			skipped.Unplaced[why] = append(skipped.Unplaced[why], ch.String())
			continue
		}
		ri := c.resource(r)
		live, err := ri.Get(ctx, r.obj.GetName(), metav1.GetOptions{})
		switch {
		case r.ifPresent && (apierrors.IsNotFound(err) || apierrors.IsForbidden(err)):
			// Not there, or not for this user to know (one who may
			// edit only the pools): nothing to bring in line.
			continue
		case apierrors.IsNotFound(err):
			ch.Change = "added"
			changes = append(changes, ch)
			continue
		case apierrors.IsForbidden(err):
			skipped.Unreachable = append(skipped.Unreachable, r)
			continue
		case err != nil:
			return nil, skipped, fmt.Errorf("reading %s: %w", ch, err)
		}
		ch.applied = r.obj.DeepCopy()
		ch.applied.SetResourceVersion(live.GetResourceVersion())
		after, err := ri.Apply(ctx, r.obj.GetName(), ch.applied, metav1.ApplyOptions{FieldManager: FieldManager, Force: true, DryRun: []string{metav1.DryRunAll}})
		if apierrors.IsForbidden(err) {
			skipped.Unreachable = append(skipped.Unreachable, r)
			continue
		}
		if err != nil {
			return nil, skipped, fmt.Errorf("%s: %w", ch, err)
		}
		if ch.Fields = fieldDiff(live.Object, after.Object); len(ch.Fields) > 0 {
			ch.Change = "changed"
			changes = append(changes, ch)
		}
	}
	return changes, skipped, nil
}

// placer returns why the cluster has no place for a rendered object ("" if
// it has): its kind is not served, or its namespace is neither rendered
// nor there. What cannot be learnt (discovery or the namespace forbidden)
// counts as a place: the object's own read or apply then says what is
// wrong.
func (c Cluster) placer(objs []rendered) func(context.Context, rendered) string {
	renderedNS := map[string]bool{}
	for _, r := range objs {
		if r.obj.GetKind() == "Namespace" {
			renderedNS[r.obj.GetName()] = true
		}
	}
	served := map[string]map[string]bool{} // group/version → resources; nil: not served
	nsThere := map[string]bool{}
	return func(ctx context.Context, r rendered) string {
		if c.Kube == nil {
			return ""
		}
		gv := r.resource.GroupVersion().String()
		resources, known := served[gv]
		if !known {
			list, err := c.Kube.Discovery().ServerResourcesForGroupVersion(gv)
			switch {
			case apierrors.IsNotFound(err):
				resources = nil
			case err != nil:
				return ""
			default:
				resources = map[string]bool{}
				for _, res := range list.APIResources {
					resources[res.Name] = true
				}
			}
			served[gv] = resources
		}
		if !resources[r.resource.Resource] {
			return "no " + r.resource.Resource + " in " + gv
		}
		ns := r.obj.GetNamespace()
		if ns == "" || renderedNS[ns] {
			return ""
		}
		there, known := nsThere[ns]
		if !known {
			_, err := c.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			there = !apierrors.IsNotFound(err)
			nsThere[ns] = there
		}
		if !there {
			return "no namespace " + ns
		}
		return ""
	}
}

// applyObjects applies each change server-side as FieldManager. A changed
// object carries the resourceVersion it was read at, so an edit made
// since the plan fails the apply instead of being overwritten.
func (c Cluster) applyObjects(ctx context.Context, changes []ObjectChange, out io.Writer) error {
	for _, ch := range changes {
		ri := c.resource(rendered{resource: ch.resource, obj: ch.applied})
		if _, err := ri.Apply(ctx, ch.Name, ch.applied, metav1.ApplyOptions{FieldManager: FieldManager, Force: true}); err != nil {
			if apierrors.IsConflict(err) {
				return fmt.Errorf("%s changed since it was read (another update?): run vipctl update again: %w", ch, err)
			}
			return fmt.Errorf("%s: %w", ch, err)
		}
		_, _ = fmt.Fprintf(out, "applied %s\n", ch)
	}
	return nil
}

// ignoredFields change on every write, or are the server's: never a
// difference between what is live and what was rendered.
var ignoredFields = []string{"metadata.managedFields", "metadata.resourceVersion", "metadata.generation", "status"}

// fieldDiff lists the leaves that differ between two objects, in path
// order, as "path: old -> new" ("(none)" for a missing side).
func fieldDiff(before, after map[string]any) []string {
	a, b := map[string]string{}, map[string]string{}
	flatten("", before, a)
	flatten("", after, b)
	paths := map[string]bool{}
	for p := range a {
		paths[p] = true
	}
	for p := range b {
		paths[p] = true
	}
	var out []string
	for p := range paths {
		if ignored(p) || a[p] == b[p] {
			continue
		}
		out = append(out, fmt.Sprintf("%s: %s -> %s", p, orNone(a[p]), orNone(b[p])))
	}
	sort.Strings(out)
	return out
}

func ignored(path string) bool {
	for _, f := range ignoredFields {
		if path == f || strings.HasPrefix(path, f+".") || strings.HasPrefix(path, f+"[") {
			return true
		}
	}
	return false
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// flatten writes every leaf of v under its path: map keys joined with
// dots (bracketed when they hold a dot or slash, as label keys do), list
// items by index; leaves and empty maps and lists as JSON.
func flatten(path string, v any, out map[string]string) {
	switch t := v.(type) {
	case map[string]any:
		if len(t) == 0 {
			break
		}
		for k, x := range t {
			p := k
			switch {
			case strings.ContainsAny(k, "./"):
				p = path + "[" + k + "]"
			case path != "":
				p = path + "." + k
			}
			flatten(p, x, out)
		}
		return
	case []any:
		if len(t) == 0 {
			break
		}
		for i, x := range t {
			flatten(fmt.Sprintf("%s[%d]", path, i), x, out)
		}
		return
	}
	data, err := json.Marshal(v)
	if err != nil {
		data = []byte(fmt.Sprint(v))
	}
	out[path] = string(data)
}
