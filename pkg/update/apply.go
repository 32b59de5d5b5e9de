package update

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/bundle"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/machineconfig"
	"github.com/vipctl/vipctl/pkg/openshiftrelease"
)

// Cluster is where an update reads and writes.
type Cluster struct {
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
	// Namespace holds the vipctl ConfigMap.
	Namespace string
}

// Live reads the ConfigMap and its config; both nil when it does not
// exist yet.
func (c Cluster) Live(ctx context.Context) (*v1alpha1.ClusterVIPs, *corev1.ConfigMap, error) {
	cm, err := c.Kube.CoreV1().ConfigMaps(c.Namespace).Get(ctx, v1alpha1.ConfigMapName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	cfg, err := cluster.ParseConfigMap(cm)
	if err != nil {
		return nil, cm, err
	}
	return cfg, cm, nil
}

// Services lists every Service (the plan looks for orphans among them).
func (c Cluster) Services(ctx context.Context) ([]corev1.Service, error) {
	list, err := c.Kube.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// ErrOrphans refuses a plan that would take addresses from Services.
var ErrOrphans = errors.New("the edit would take addresses from Services")

// Apply carries out a plan computed against cm (nil: create it). Without
// force a plan with orphans, or with MachineConfigs the cluster's release
// cannot parse, is refused before anything is written. The
// ConfigMap is written with the resourceVersion it was read at, so a
// concurrent edit fails instead of being overwritten. Progress goes to
// out.
func (c Cluster) Apply(ctx context.Context, p *Plan, cm *corev1.ConfigMap, force bool, out io.Writer) error {
	if len(p.Orphans) > 0 && !force {
		var names []string
		for _, o := range p.Orphans {
			names = append(names, fmt.Sprintf("%s (%s)", o.Service, strings.Join(o.Addresses, ", ")))
		}
		return fmt.Errorf("%w: %s; change their addresses first, or run with --force to release them", ErrOrphans, strings.Join(names, ", "))
	}
	if p.Release != nil && len(p.Static) > 0 {
		if !force {
			return p.Release.Refusal()
		}
		_, _ = fmt.Fprintf(out, "warning: %s: writing the MachineConfigs anyway (--force)\n", p.Release.Message)
	}
	// The ClusterVIPs CRD before its object: an older schema prunes, or
	// under strict validation refuses, the fields this release writes.
	schemas, objects := splitSchemas(p.Objects)
	if err := c.applyObjects(ctx, schemas, out); err != nil {
		return err
	}
	if p.Object != nil && p.configChanges() {
		// The source next: a concurrent edit of it refuses the
		// update before anything else is written.
		if err := c.writeObjectUnder(ctx, p, len(schemas) > 0, out); err != nil {
			return err
		}
	}
	if p.configChanges() || p.Object != nil && mirrorStale(cm, p.Desired) {
		if err := c.writeConfigMap(ctx, p.Desired, cm, out); err != nil {
			if p.Object != nil && p.configChanges() {
				return fmt.Errorf("ClusterVIPs %s is written, its copy in the ConfigMap (what sidecars before v0.2.0 read) is not: run vipctl update again: %w", p.Object.GetName(), err)
			}
			return err
		}
	}
	for _, o := range p.Orphans {
		if err := c.release(ctx, o); err != nil {
			return err
		}
		if o.ExternalIP {
			_, _ = fmt.Fprintf(out, "no longer announcing external IP %s of Service %s\n", strings.Join(o.Addresses, ", "), o.Service)
			continue
		}
		_, _ = fmt.Fprintf(out, "released %s from Service %s\n", strings.Join(o.Addresses, ", "), o.Service)
	}
	// The cluster's objects before the MachineConfigs: the nodes roll to
	// the new release over minutes to hours after this returns, and a new
	// sidecar must find the permissions it needs when its node comes up
	// (RBAC only grows from one release to the next), while the
	// allocator, one writer whose Service status both releases read,
	// may move at once (docs/upgrade.md, "The order").
	if err := c.applyObjects(ctx, objects, out); err != nil {
		return err
	}
	if len(p.Static) > 0 {
		roll, err := c.writeMachineConfigs(ctx, p.Desired, p.BootstrapNodes, out)
		if err != nil {
			return err
		}
		_, _ = fmt.Fprintln(out, roll)
	}
	return nil
}

// writeConfigMap writes desired into the vipctl ConfigMap: created when
// cm is nil, else updated from cm with its resourceVersion.
func (c Cluster) writeConfigMap(ctx context.Context, desired *v1alpha1.ClusterVIPs, cm *corev1.ConfigMap, out io.Writer) error {
	data, err := desired.ShippedYAML()
	if err != nil {
		return err
	}
	if cm == nil {
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.ConfigMapName, Namespace: c.Namespace,
			Labels: map[string]string{"app.kubernetes.io/name": "vipctl", "app.kubernetes.io/component": "config"}},
			Data: map[string]string{v1alpha1.ConfigMapKey: string(data)}}
		if _, err := c.Kube.CoreV1().ConfigMaps(c.Namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			if apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("ConfigMap %s/%s was created by someone else meanwhile: run vipctl update again", c.Namespace, v1alpha1.ConfigMapName)
			}
			return err
		}
	} else {
		next := cm.DeepCopy()
		if next.Data == nil {
			next.Data = map[string]string{}
		}
		next.Data[v1alpha1.ConfigMapKey] = string(data)
		if _, err := c.Kube.CoreV1().ConfigMaps(c.Namespace).Update(ctx, next, metav1.UpdateOptions{}); err != nil {
			if apierrors.IsConflict(err) {
				return fmt.Errorf("ConfigMap %s/%s changed since it was read (another update?): nothing written; run vipctl update again: %w", c.Namespace, v1alpha1.ConfigMapName, err)
			}
			return err
		}
	}
	_, _ = fmt.Fprintf(out, "wrote ConfigMap %s/%s\n", c.Namespace, v1alpha1.ConfigMapName)
	return nil
}

// release takes the orphaned addresses out of a Service's status and says
// so in an Event; the allocator then gives it a new address.
func (c Cluster) release(ctx context.Context, o Orphan) error {
	ns, name, _ := strings.Cut(o.Service, "/")
	s, err := c.Kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if o.ExternalIP {
		return c.releasedEvent(ctx, s, fmt.Sprintf("vipctl update --force: external IP %s no longer announced: %s", strings.Join(o.Addresses, ", "), o.Reason))
	}
	var keep []corev1.LoadBalancerIngress
	for _, in := range s.Status.LoadBalancer.Ingress {
		lost := false
		for _, a := range o.Addresses {
			if in.IP == a {
				lost = true
			}
		}
		if !lost {
			keep = append(keep, in)
		}
	}
	s.Status.LoadBalancer.Ingress = keep
	if _, err := c.Kube.CoreV1().Services(ns).UpdateStatus(ctx, s, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("releasing %s: %w", o.Service, err)
	}
	return c.releasedEvent(ctx, s, fmt.Sprintf("vipctl update --force released %s: %s", strings.Join(o.Addresses, ", "), o.Reason))
}

// releasedEvent tells a Service's owner what update --force took.
func (c Cluster) releasedEvent(ctx context.Context, s *corev1.Service, msg string) error {
	ns, name := s.Namespace, s.Name
	now := metav1.NewTime(time.Now())
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: name + ".", Namespace: ns},
		InvolvedObject: corev1.ObjectReference{Kind: "Service", APIVersion: "v1", Namespace: ns, Name: name, UID: s.UID},
		Reason:         "IPReleased", Type: corev1.EventTypeWarning,
		Message:        msg,
		Source:         corev1.EventSource{Component: v1alpha1.EventSourceUpdate},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
	}
	if _, err := c.Kube.CoreV1().Events(ns).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("event on %s/%s: %w", ns, name, err)
	}
	return nil
}

// writeMachineConfigs creates or replaces the MachineConfigs `vipctl
// render` would write for the desired config, with the bootstrap node list
// of nodes (nil: the live cluster's Nodes), as `render --nodes` ships it,
// after render's node disruption policy for them (when the target release
// has them). It returns what the coming roll costs the nodes.
func (c Cluster) writeMachineConfigs(ctx context.Context, desired *v1alpha1.ClusterVIPs, nodes []corev1.Node, out io.Writer) (string, error) {
	if c.Dynamic == nil {
		return "", errors.New("static parts changed but no dynamic client to write MachineConfigs")
	}
	if nodes == nil {
		var err error
		if nodes, err = c.bootstrapNodes(ctx, out); err != nil {
			return "", err
		}
	}
	files, err := bundle.Build(desired, bundle.Options{BootstrapNodes: nodes})
	if err != nil {
		return "", err
	}
	target, err := openshiftrelease.Parse(desired.Spec.OpenShiftRelease)
	if err != nil {
		return "", fmt.Errorf("spec.openshiftRelease: %w", err)
	}
	roll, err := c.applyDisruptionPolicy(ctx, files, bundle.RebootWarning(target), out)
	if err != nil {
		return "", err
	}
	ri := c.Dynamic.Resource(machineconfig.GVR)
	for _, f := range files {
		if !strings.HasPrefix(f.Path, "machineconfigs/") {
			continue
		}
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(f.Data, &obj.Object); err != nil {
			return "", fmt.Errorf("%s: %w", f.Path, err)
		}
		cur, err := ri.Get(ctx, obj.GetName(), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = ri.Create(ctx, obj, metav1.CreateOptions{})
		case err == nil:
			obj.SetResourceVersion(cur.GetResourceVersion())
			_, err = ri.Update(ctx, obj, metav1.UpdateOptions{})
		}
		if err != nil {
			return "", fmt.Errorf("MachineConfig %s: %w", obj.GetName(), err)
		}
		_, _ = fmt.Fprintf(out, "wrote MachineConfig %s\n", obj.GetName())
	}
	return roll, nil
}

// bootstrapNodes are the live Nodes the bootstrap node list is cut from
// (cluster.BootstrapNodeList), with a warning for each left out and when
// none is a control-plane node.
func (c Cluster) bootstrapNodes(ctx context.Context, out io.Writer) ([]corev1.Node, error) {
	items, err := c.Nodes(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing Nodes for the bootstrap node list: %w", err)
	}
	slim, skipped := cluster.SlimNodes(items)
	for _, e := range skipped {
		_, _ = fmt.Fprintf(out, "warning: bootstrap node list: left out %v\n", e)
	}
	if !slices.ContainsFunc(slim, func(n corev1.Node) bool { return cluster.IsControlPlane(n.Labels) }) {
		_, _ = fmt.Fprintln(out, "warning: no control-plane Node to list: the MachineConfigs carry no bootstrap node list, so a control-plane node's API VIP waits for the API after a reinstall (pass --nodes)")
	}
	return slim, nil
}

// Nodes lists every Node (status reads their vipctl.io/vips annotation).
func (c Cluster) Nodes(ctx context.Context) ([]corev1.Node, error) {
	list, err := c.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// splitSchemas parts changes into the CustomResourceDefinitions and the
// rest, each in its order.
func splitSchemas(changes []ObjectChange) (schemas, rest []ObjectChange) {
	for _, ch := range changes {
		if ch.resource == crdResource {
			schemas = append(schemas, ch)
		} else {
			rest = append(rest, ch)
		}
	}
	return schemas, rest
}

// schemaDelay bounds how long a write of the object waits for a CRD
// just applied to take effect: the apiserver serves a changed schema a
// moment after the CRD's update returns, and until then refuses the new
// fields as unknown.
const schemaDelay = 15 * time.Second

// writeObjectUnder writes the plan's object; after a CRD change
// (newSchema) a refusal of an unknown field is tried again until
// schemaDelay has passed.
func (c Cluster) writeObjectUnder(ctx context.Context, p *Plan, newSchema bool, out io.Writer) error {
	return retryForSchema(ctx, func(err error) bool {
		return newSchema && apierrors.IsBadRequest(err) && strings.Contains(err.Error(), "unknown field")
	}, func() error { return c.writeObject(ctx, p.Desired, p.Object, out) })
}

// retryForSchema runs op, and again every 250 ms while it fails with an
// error pending says a schema just applied has not taken effect yet, for
// up to schemaDelay.
func retryForSchema(ctx context.Context, pending func(error) bool, op func() error) error {
	deadline := time.Now().Add(schemaDelay)
	for {
		err := op()
		if err == nil || !pending(err) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(250 * time.Millisecond):
		}
	}
}
