package runtimecfg

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the sidecar's Prometheus metrics.
type Metrics struct {
	Renders       prometheus.Counter
	Reloads       *prometheus.CounterVec
	Failures      *prometheus.CounterVec
	WatchErrors   *prometheus.CounterVec
	WatchEvents   *prometheus.CounterVec
	VIPsHeld      prometheus.Gauge
	ConfigInvalid prometheus.Gauge
	StaticDrift   prometheus.Gauge
	LastGood      prometheus.Gauge
	Lonely        prometheus.Gauge
	Unannounced   prometheus.Gauge
	SyncSeconds   prometheus.Histogram
}

// NewMetrics creates the metrics and registers them with reg (nil: not
// registered, as in tests running several sidecars in one process).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	const ns, sub = "vipctl", "runtimecfg"
	m := &Metrics{
		Renders: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "renders_total",
			Help: "Desired states rendered from the cluster."}),
		Reloads: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "reloads_total",
			Help: "Reloads sent to a daemon after its config changed."}, []string{"daemon"}),
		Failures: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "failures_total",
			Help: "Syncs that kept the last good config, by reason (config, render, apply, write, publish)."}, []string{"reason"}),
		WatchErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "watch_errors_total",
			Help: "Failed lists or watches, by resource (a missing permission shows here)."}, []string{"resource"}),
		WatchEvents: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "watch_events_total",
			Help: "Events from the cluster watches, by resource and whether they asked for a sync (sync) or changed nothing rendering reads (ignored)."}, []string{"resource", "action"}),
		VIPsHeld: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "vips_held",
			Help: "VIPs on this node's interfaces."}),
		ConfigInvalid: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "config_invalid",
			Help: "1 while the vipctl ConfigMap does not hold a valid config (its last valid pools stay in force)."}),
		StaticDrift: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "static_config_drift",
			Help: "1 while the ConfigMap's static parts differ from this node's file (a MachineConfig rollout is pending)."}),
		Lonely: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "instances_without_peer",
			Help: "VRRP instances left out of this node's config because it is their only eligible node."}),
		Unannounced: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "services_not_announced",
			Help: "externalTrafficPolicy Local Services left out because no VRRP ID is free; their VIPs are not announced."}),
		LastGood: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "last_good_sync_timestamp_seconds",
			Help: "When the files last matched the cluster."}),
		SyncSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "sync_duration_seconds",
			Help: "Time to render, check and apply.", Buckets: prometheus.ExponentialBuckets(0.005, 2, 12)}),
	}
	if reg != nil {
		reg.MustRegister(m.Renders, m.Reloads, m.Failures, m.WatchErrors, m.WatchEvents, m.VIPsHeld, m.ConfigInvalid, m.StaticDrift, m.LastGood, m.Lonely, m.Unannounced, m.SyncSeconds)
	}
	return m
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
