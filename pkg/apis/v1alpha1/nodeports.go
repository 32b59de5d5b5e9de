package v1alpha1

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Ports vipctl's own processes bind on every node whatever the config
// says. pkg/render/paths.go gives them their node-side names
// (render.SidecarPort, HaproxyStatsPort, MetricsPort); they are defined
// here so that Validate can refuse a configured port that would clash
// with one of them (haproxy, kube-apiserver or a router would then fail
// to bind it on every node). 9447-9449 are in the 9000-9999 range
// OpenShift opens between nodes and in none of its host port registry's
// entries (openshift/enhancements dev-guide/host-port-registry.md).
const (
	// SidecarProbePort: the sidecar's /healthz, /readyz and plain
	// /metrics, on 127.0.0.1 only.
	SidecarProbePort = 9447
	// HaproxyStatsPort: haproxy's stats page, on 127.0.0.1 only.
	HaproxyStatsPort = 9448
	// MetricsPort: the sidecar's /metrics for the cluster's Prometheus,
	// on every address, TLS with the scraper authorized by the API server
	// (pkg/metricsserver). The allocator's pod serves its own on the same
	// number.
	MetricsPort = 9449
)

// nodePorts names each fixed port's user, for the error.
var nodePorts = map[int32]string{
	SidecarProbePort: "vipctl's sidecar serves its health probes on 127.0.0.1",
	HaproxyStatsPort: "haproxy serves its stats page on 127.0.0.1",
	MetricsPort:      "vipctl's sidecar serves /metrics to the cluster's Prometheus",
}

// validateNodePort refuses a configured port that one of vipctl's own
// processes binds on every node.
func validateNodePort(p int32, path *field.Path) field.ErrorList {
	if who, taken := nodePorts[p]; taken {
		return field.ErrorList{field.Invalid(path, p, fmt.Sprintf("%s on %d on every node", who, p))}
	}
	return nil
}
