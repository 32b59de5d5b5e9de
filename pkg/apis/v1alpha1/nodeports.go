package v1alpha1

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Ports vipctl's own processes bind on every node whatever the config
// says. pkg/render/paths.go gives them their node-side names
// (render.SidecarPort, HaproxyStatsPort); they are defined here so that
// Validate can refuse a configured port that would clash with one of them
// (haproxy, kube-apiserver or a router would then fail to bind it on every
// node). 9447-9449 are in the 9000-9999 range OpenShift opens between
// nodes and in none of its host port registry's entries
// (openshift/enhancements dev-guide/host-port-registry.md).
const (
	// SidecarProbePort: the sidecar's /healthz, /readyz and plain
	// /metrics, on 127.0.0.1 only.
	SidecarProbePort = 9447
	// HaproxyStatsPort: haproxy's stats page, on 127.0.0.1 only.
	HaproxyStatsPort = 9448
	// DefaultMetricsPort is spec.monitoring.port's default: the sidecar's
	// /metrics for the cluster's Prometheus, on every address, TLS with
	// the scraper authorized by the API server (pkg/metricsserver). The
	// allocator's pod serves its own on the same number.
	DefaultMetricsPort = 9449
)

// fixedNodePorts names each fixed port's user, for the error.
var fixedNodePorts = map[int32]string{
	SidecarProbePort: "vipctl's sidecar serves its health probes on 127.0.0.1",
	HaproxyStatsPort: "haproxy serves its stats page on 127.0.0.1",
}

// seenPort is a configured port some process binds on the nodes.
type seenPort struct {
	port int32
	path *field.Path
}

// nodePort refuses a configured port that one of vipctl's own processes
// binds on every node (the metrics port too while it is the default; a
// metrics port set in spec.monitoring.port is checked against the
// configured ports by monitoringPort, on its own field) and remembers it.
func (v *validator) nodePort(p int32, path *field.Path) field.ErrorList {
	v.ports = append(v.ports, seenPort{p, path})
	if who, taken := fixedNodePorts[p]; taken {
		return field.ErrorList{field.Invalid(path, p, fmt.Sprintf("%s on %d on every node", who, p))}
	}
	if !v.metricsPortSet && p == DefaultMetricsPort {
		return field.ErrorList{field.Invalid(path, p, fmt.Sprintf("vipctl's sidecar serves /metrics to the cluster's Prometheus on %d on every node (spec.monitoring.port moves it)", p))}
	}
	return nil
}

// monitoringPort checks spec.monitoring.port, when set, against vipctl's
// fixed node ports and every configured port the nodes bind.
func (v *validator) monitoringPort(p int32, path *field.Path) field.ErrorList {
	if p == 0 {
		return nil
	}
	if errs := validatePort(p, path); len(errs) > 0 {
		return errs
	}
	if who, taken := fixedNodePorts[p]; taken {
		return field.ErrorList{field.Invalid(path, p, fmt.Sprintf("%s on %d on every node", who, p))}
	}
	for _, s := range v.ports {
		if s.port == p {
			return field.ErrorList{field.Invalid(path, p, fmt.Sprintf("%s is %d too; the sidecar serves /metrics on every address of every node", s.path, p))}
		}
	}
	return nil
}

// MetricsPort is spec.monitoring.port, DefaultMetricsPort when unset. Like
// the stack, it is not written in by SetDefaults (see MonitoringStack).
func (s *ClusterVIPsSpec) MetricsPort() int32 {
	if s.Monitoring == nil || s.Monitoring.Port == 0 {
		return DefaultMetricsPort
	}
	return s.Monitoring.Port
}
