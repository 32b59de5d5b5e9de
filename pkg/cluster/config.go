package cluster

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
)

// Effective merges the day-2 parts of the live ConfigMap's config (service
// pools, VRRP ID pins, the bootstrap host and the load-balancer class)
// into the static config the MachineConfig laid down. Everything else comes from the file: changing it needs new files
// on the nodes, which only a MachineConfig rollout brings. drift tells
// whether the ConfigMap's static parts differ from the file's (an update
// whose MachineConfigs have not reached this node yet).
func Effective(static, live *v1alpha1.ClusterVIPs) (c *v1alpha1.ClusterVIPs, drift bool, err error) {
	// A shallow copy is enough: the day-2 fields are replaced, never
	// modified in place.
	cp := *static
	out := &cp
	if live == nil {
		return out, false, nil
	}
	out.Spec.ServicePools = live.Spec.ServicePools
	out.Spec.VRRP.VirtualRouterIDs = live.Spec.VRRP.VirtualRouterIDs
	out.Spec.VRRP.AvoidVirtualRouterIDs = live.Spec.VRRP.AvoidVirtualRouterIDs
	// The bootstrap host is a peer only until the install completes:
	// dropping it must not take a reboot of every control-plane node.
	out.Spec.Bootstrap = live.Spec.Bootstrap
	// Which Services are served is the allocator's and every sidecar's
	// reading of the ConfigMap, never a file's.
	out.Spec.LoadBalancerClass = live.Spec.LoadBalancerClass
	if errs := v1alpha1.Validate(out); len(errs) > 0 {
		return nil, false, &v1alpha1.ValidationError{Errors: errs}
	}
	return out, !equalYAML(out, live), nil
}

func equalYAML(a, b any) bool {
	x, err1 := yaml.Marshal(a)
	y, err2 := yaml.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}

// ReadConfigMap decodes the ClusterVIPs held in the vipctl ConfigMap.
// The ConfigMap is a copy vipctl wrote (v1alpha1.ParseStored): during an
// upgrade or after a rollback a newer vipctl may have written it, so the
// fields this one does not know come back in unknown, ignored, instead of
// failing it (docs/upgrade.md, "Version skew"). Its readers say so: the
// sidecar and the allocator with a metric and an Event, status and
// diagnose with a warning; `vipctl update` refuses to write over them.
func ReadConfigMap(cm *corev1.ConfigMap) (c *v1alpha1.ClusterVIPs, unknown v1alpha1.UnknownFields, err error) {
	data, ok := cm.Data[v1alpha1.ConfigMapKey]
	if !ok {
		return nil, nil, fmt.Errorf("configmap %s/%s: no key %q", cm.Namespace, cm.Name, v1alpha1.ConfigMapKey)
	}
	c, unknown, err = v1alpha1.ParseStored([]byte(data))
	if err != nil {
		return nil, nil, fmt.Errorf("configmap %s/%s: %w", cm.Namespace, cm.Name, err)
	}
	return c, unknown, nil
}

// ParseConfigMap is ReadConfigMap without the unknown fields, for a
// reader with no one to tell of them.
func ParseConfigMap(cm *corev1.ConfigMap) (*v1alpha1.ClusterVIPs, error) {
	c, _, err := ReadConfigMap(cm)
	return c, err
}
