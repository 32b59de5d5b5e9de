package manifests

import (
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/metricsserver"
	"github.com/vipctl/vipctl/pkg/onnode"
)

// Names of the objects through which the cluster's Prometheus scrapes
// vipctl.
const (
	// MetricsReaderName is the ClusterRole allowing get on /metrics, the
	// SubjectAccessReview the metrics endpoints ask for each scraper.
	MetricsReaderName = "vipctl-metrics-reader"
	// PrometheusRoleName lets the Prometheus discover the targets in
	// vipctl's namespace.
	PrometheusRoleName = "vipctl-prometheus"
	// NodeMetricsName names the headless Service over the keepalived
	// pods' mirror pods and its ServiceMonitor.
	NodeMetricsName = "vipctl-runtimecfg-metrics"
	// AllocatorMetricsName names the allocator's metrics Service and
	// ServiceMonitor.
	AllocatorMetricsName = "vipctl-allocator-metrics"
	// AllocatorMetricsSecret holds the allocator's serving certificate:
	// on OpenShift the service CA writes it (the Service's
	// serving-cert-secret-name annotation); elsewhere it does not exist
	// and the allocator serves a self-signed certificate.
	AllocatorMetricsSecret = "vipctl-allocator-metrics-tls"
	// AllocatorMetricsCertDir is where the allocator's container mounts
	// that Secret.
	AllocatorMetricsCertDir = "/etc/vipctl/metrics-tls"
	// metricsPortName names the port in the pods, Services and
	// ServiceMonitors.
	metricsPortName = "metrics"
	// clusterMonitoringLabel makes OpenShift's platform Prometheus select a
	// namespace's ServiceMonitors and PrometheusRules.
	clusterMonitoringLabel = "openshift.io/cluster-monitoring"
)

// Files the Prometheus pods of OpenShift's cluster monitoring mount: the
// CA that signs the kubelets' serving certificates (which the sidecar
// serves with) and the service CA (which signs the allocator's), and the
// pod's own ServiceAccount token.
const (
	openShiftKubeletServingCA = "/etc/prometheus/configmaps/kubelet-serving-ca-bundle/ca-bundle.crt"
	openShiftServiceCA        = "/etc/prometheus/configmaps/serving-certs-ca-bundle/service-ca.crt"
	serviceAccountToken       = "/var/run/secrets/kubernetes.io/serviceaccount/token"
	// scrapeInterval matches OpenShift's platform default.
	scrapeInterval = "30s"
)

// Monitoring is what manifests/monitoring.yaml holds for the stack
// spec.monitoring names (nothing for "none"): the Namespace, the RBAC the
// Prometheus needs (get on /metrics, which every vipctl metrics endpoint
// asks the API server about each scraper; target discovery in vipctl's
// namespace), a headless Service over the keepalived pods' mirror pods and
// one over the allocator's pods, a ServiceMonitor for each, the
// PrometheusRule with vipctl's alerts, and for OpenShift the console's
// dashboard.
func Monitoring(c *v1alpha1.ClusterVIPs) []runtime.Object {
	stack := c.Spec.MonitoringStack()
	if stack == v1alpha1.MonitoringNone {
		return nil
	}
	prom := c.Spec.PrometheusServiceAccount()
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: prom.Name, Namespace: prom.Namespace}}
	monLabels := func(component string) map[string]string {
		l := labels(component)
		for k, v := range c.Spec.MonitoringLabels() {
			l[k] = v
		}
		return l
	}
	readerMeta := metav1.ObjectMeta{Name: MetricsReaderName, Labels: labels("monitoring")}
	promMeta := meta(PrometheusRoleName, "monitoring")
	read := []string{"get", "list", "watch"}
	objs := []runtime.Object{
		Namespace(c),
		&rbacv1.ClusterRole{TypeMeta: tm(rbacv1.SchemeGroupVersion.String(), "ClusterRole"), ObjectMeta: readerMeta,
			Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{metricsserver.Path}, Verbs: []string{"get"}}}},
		&rbacv1.ClusterRoleBinding{TypeMeta: tm(rbacv1.SchemeGroupVersion.String(), "ClusterRoleBinding"), ObjectMeta: readerMeta,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: MetricsReaderName}, Subjects: subject},
		&rbacv1.Role{TypeMeta: tm(rbacv1.SchemeGroupVersion.String(), "Role"), ObjectMeta: promMeta,
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"services", "endpoints", "pods"}, Verbs: read},
				{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: read},
			}},
		&rbacv1.RoleBinding{TypeMeta: tm(rbacv1.SchemeGroupVersion.String(), "RoleBinding"), ObjectMeta: promMeta,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: PrometheusRoleName}, Subjects: subject},
	}
	nodeSvc := metricsService(NodeMetricsName, "runtimecfg", c.Spec.MetricsPort(), map[string]string{"app": onnode.KeepalivedPodName})
	allocSvc := metricsService(AllocatorMetricsName, "allocator", c.Spec.MetricsPort(), allocatorSelector())
	nodeTLS := &monitoringv1.TLSConfig{SafeTLSConfig: monitoringv1.SafeTLSConfig{InsecureSkipVerify: ptr.To(true)}}
	allocTLS := nodeTLS
	if stack == v1alpha1.MonitoringOpenShift {
		// The sidecar serves the kubelet's certificate, which names the
		// node's addresses (the scrape targets) and is signed by the CA
		// this Prometheus verifies the kubelets with. The service CA
		// writes the allocator's, for the Service's DNS name.
		nodeTLS = &monitoringv1.TLSConfig{TLSFilesConfig: monitoringv1.TLSFilesConfig{CAFile: openShiftKubeletServingCA}}
		allocTLS = &monitoringv1.TLSConfig{
			SafeTLSConfig:  monitoringv1.SafeTLSConfig{ServerName: ptr.To(AllocatorMetricsName + "." + onnode.Namespace + ".svc")},
			TLSFilesConfig: monitoringv1.TLSFilesConfig{CAFile: openShiftServiceCA},
		}
		allocSvc.Annotations = map[string]string{"service.beta.openshift.io/serving-cert-secret-name": AllocatorMetricsSecret}
	}
	// The mirror pods' node, as a label every alert can name.
	nodeLabel := []monitoringv1.RelabelConfig{{
		SourceLabels: []monitoringv1.LabelName{"__meta_kubernetes_pod_node_name"},
		TargetLabel:  "node",
		Action:       "replace",
	}}
	objs = append(objs, nodeSvc, allocSvc,
		serviceMonitor(NodeMetricsName, "runtimecfg", monLabels("runtimecfg"), nodeTLS, nodeLabel),
		serviceMonitor(AllocatorMetricsName, "allocator", monLabels("allocator"), allocTLS, nil),
		PrometheusRule(c),
	)
	if stack == v1alpha1.MonitoringOpenShift {
		objs = append(objs, DashboardConfigMap())
	}
	return objs
}

// metricsService is a headless Service over the pods selector picks,
// not-ready ones included: a sidecar that is not ready (it cannot reach
// the API) is what an alert must see.
func metricsService(name, component string, port int32, selector map[string]string) *corev1.Service {
	return &corev1.Service{TypeMeta: tm("v1", "Service"), ObjectMeta: meta(name, component),
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			Selector:                 selector,
			PublishNotReadyAddresses: true,
			Ports: []corev1.ServicePort{{Name: metricsPortName, Port: port,
				TargetPort: intstr.FromInt32(port), Protocol: corev1.ProtocolTCP}},
		}}
}

func serviceMonitor(name, component string, objLabels map[string]string, tls *monitoringv1.TLSConfig, relabel []monitoringv1.RelabelConfig) *monitoringv1.ServiceMonitor {
	m := meta(name, component)
	m.Labels = objLabels
	// Lower case: prometheus-operator releases before 0.80 (OpenShift 4.14's
	// 0.67) pass the scheme to Prometheus as written.
	https := monitoringv1.Scheme("https")
	return &monitoringv1.ServiceMonitor{
		TypeMeta:   tm(monitoringv1.SchemeGroupVersion.String(), monitoringv1.ServiceMonitorsKind),
		ObjectMeta: m,
		Spec: monitoringv1.ServiceMonitorSpec{
			Selector:          metav1.LabelSelector{MatchLabels: labels(component)},
			NamespaceSelector: monitoringv1.NamespaceSelector{MatchNames: []string{onnode.Namespace}},
			Endpoints: []monitoringv1.Endpoint{{
				Port:     metricsPortName,
				Path:     metricsserver.Path,
				Scheme:   &https,
				Interval: scrapeInterval,
				// The Prometheus pod's own token, as OpenShift's own
				// ServiceMonitors scrape with; `authorization` would
				// need a long-lived token Secret in vipctl's namespace.
				BearerTokenFile: serviceAccountToken, //nolint:staticcheck // deprecated upstream, still what OpenShift's Prometheus uses

				HTTPConfigWithProxyAndTLSFiles: monitoringv1.HTTPConfigWithProxyAndTLSFiles{
					HTTPConfigWithTLSFiles: monitoringv1.HTTPConfigWithTLSFiles{TLSConfig: tls},
				},
				RelabelConfigs: relabel,
			}},
		},
	}
}
