package v1alpha1

import (
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Monitoring stacks `vipctl render` writes scrape objects for
// (spec.monitoring.stack).
const (
	// MonitoringOpenShift is OpenShift's cluster monitoring stack in
	// openshift-monitoring: vipctl's namespace gets the label
	// openshift.io/cluster-monitoring=true, which its Prometheus selects.
	MonitoringOpenShift = "openshift"
	// MonitoringPrometheusOperator is a plain prometheus-operator.
	MonitoringPrometheusOperator = "prometheus-operator"
	// MonitoringNone writes no scrape objects; the endpoints serve all
	// the same.
	MonitoringNone = "none"
)

// The Prometheus ServiceAccounts of each stack unless spec.monitoring
// names one: OpenShift's platform Prometheus, and kube-prometheus's.
const (
	openShiftMonitoringNamespace = "openshift-monitoring"
	kubePrometheusNamespace      = "monitoring"
	prometheusServiceAccount     = "prometheus-k8s"
)

// MonitoringSpec says which Prometheus scrapes vipctl's metrics and
// evaluates its alerts, for the objects `vipctl render` writes to
// DIR/manifests/monitoring.yaml (docs/monitoring.md).
type MonitoringSpec struct {
	// Stack is "openshift" (default: the cluster monitoring stack;
	// vipctl's namespace gets openshift.io/cluster-monitoring=true and
	// the scrapes verify the endpoints' certificates with the CA bundles
	// that Prometheus mounts), "prometheus-operator" (a plain
	// prometheus-operator; the scrapes skip certificate verification,
	// as kube-prometheus does for the kubelet, and are authorized by the
	// API server all the same) or "none" (no scrape objects).
	// +kubebuilder:validation:Enum=openshift;prometheus-operator;none
	Stack string `json:"stack,omitempty"`
	// Prometheus is the ServiceAccount the Prometheus pods run as: it is
	// granted get on /metrics and the reads service discovery needs in
	// vipctl's namespace. Default openshift-monitoring/prometheus-k8s
	// (stack openshift) or monitoring/prometheus-k8s (kube-prometheus).
	Prometheus *ServiceAccountRef `json:"prometheus,omitempty"`
	// Port is where the sidecar serves /metrics to the Prometheus on
	// every address of every node (TLS, the scraper authorized by the API
	// server), and the allocator in its pod. It must not clash with a
	// port the nodes bind already: spec.api's ports, spec.ingress[].
	// healthPort, and the table of ports vipctl never takes
	// (docs/config-reference.md). Default 9449.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port,omitempty"`
	// Labels are set on the ServiceMonitors, PodMonitors and the
	// PrometheusRule, for a Prometheus whose selectors ask for some
	// (kube-prometheus-stack's `release: NAME`).
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$') && (k.contains('/') ? k.split('/')[1].size() <= 63 && k.split('/')[0].size() <= 253 : k.size() <= 63))",message="keys must be label keys (an optional DNS subdomain prefix and /, then at most 63 of A-Z a-z 0-9 - _ . beginning and ending alphanumeric)"
	Labels map[string]string `json:"labels,omitempty"`
}

// ServiceAccountRef names a ServiceAccount.
type ServiceAccountRef struct {
	// Namespace is the ServiceAccount's namespace.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespace string `json:"namespace"`
	// Name is the ServiceAccount's name.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`
}

// MonitoringStack is spec.monitoring.stack, "openshift" when unset. It is
// not written in by SetDefaults: a default in the vipctl-config ConfigMap
// would be an unknown field to the sidecars of an older vipctl during a
// rolling update.
func (s *ClusterVIPsSpec) MonitoringStack() string {
	if s.Monitoring == nil || s.Monitoring.Stack == "" {
		return MonitoringOpenShift
	}
	return s.Monitoring.Stack
}

// PrometheusServiceAccount is the ServiceAccount the stack's Prometheus
// runs as.
func (s *ClusterVIPsSpec) PrometheusServiceAccount() ServiceAccountRef {
	if s.Monitoring != nil && s.Monitoring.Prometheus != nil {
		return *s.Monitoring.Prometheus
	}
	if s.MonitoringStack() == MonitoringPrometheusOperator {
		return ServiceAccountRef{Namespace: kubePrometheusNamespace, Name: prometheusServiceAccount}
	}
	return ServiceAccountRef{Namespace: openShiftMonitoringNamespace, Name: prometheusServiceAccount}
}

// MonitoringLabels are spec.monitoring.labels.
func (s *ClusterVIPsSpec) MonitoringLabels() map[string]string {
	if s.Monitoring == nil {
		return nil
	}
	return s.Monitoring.Labels
}

func validateMonitoring(m *MonitoringSpec, path *field.Path) field.ErrorList {
	if m == nil {
		return nil
	}
	var errs field.ErrorList
	switch m.Stack {
	case "", MonitoringOpenShift, MonitoringPrometheusOperator, MonitoringNone:
	default:
		errs = append(errs, field.NotSupported(path.Child("stack"), m.Stack, []string{MonitoringOpenShift, MonitoringPrometheusOperator, MonitoringNone}))
	}
	if p := m.Prometheus; p != nil {
		pp := path.Child("prometheus")
		errs = append(errs, validateName(p.Namespace, pp.Child("namespace"))...)
		errs = append(errs, validateServiceAccountName(p.Name, pp.Child("name"))...)
	}
	errs = append(errs, validateLabels(m.Labels, path.Child("labels"))...)
	return errs
}

// validateServiceAccountName checks a ServiceAccount's name by
// Kubernetes' own rule for it, a DNS-1123 subdomain: dots are allowed
// (prometheus.k8s), unlike in a namespace's name.
func validateServiceAccountName(name string, path *field.Path) field.ErrorList {
	return validateNameBy(validation.IsDNS1123Subdomain, name, path)
}
