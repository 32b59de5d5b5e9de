package sidecar

import (
	"fmt"
	"net/netip"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
)

// Metrics are the sidecar's Prometheus metrics.
type Metrics struct {
	Renders        prometheus.Counter
	Reloads        *prometheus.CounterVec
	Failures       *prometheus.CounterVec
	WatchErrors    *prometheus.CounterVec
	WatchEvents    *prometheus.CounterVec
	VIPsHeld       prometheus.Gauge
	VIPHeld        *HeldCollector
	SyncFailing    prometheus.Gauge
	APIReachable   prometheus.Gauge
	Drained        prometheus.Gauge
	DaemonRestarts *prometheus.CounterVec
	ConfigInvalid  prometheus.Gauge
	StaticDrift    prometheus.Gauge
	// UnknownFields counts the fields of a copy of the config (the
	// ConfigMap, the file) that a newer vipctl wrote and this one ignores.
	UnknownFields *prometheus.GaugeVec
	LastGood      prometheus.Gauge
	Lonely        prometheus.Gauge
	Unannounced   prometheus.Gauge
	// ProxyPending counts the Local Services with a ready endpoint here
	// that the node's service proxy does not deliver to yet.
	ProxyPending prometheus.Gauge
	// InterfaceMissing is 1 per pool or IngressController whose own
	// interface this node lacks.
	InterfaceMissing *prometheus.GaugeVec
	SyncSeconds      prometheus.Histogram
	BGP              BGPMetrics
	VRRP             VRRPMetrics
	Wire             WireMetrics
	// Heal counts what the node did about its VIPs nobody hears
	// (heal.go), by action.
	Heal *prometheus.CounterVec
}

// VRRPMetrics describe the VRRP adverts the node's tap hears (foreign.go).
type VRRPMetrics struct {
	Received        *prometheus.CounterVec
	Foreign         *prometheus.CounterVec
	ForeignLastSeen *prometheus.GaugeVec
	ClashProposed   *prometheus.GaugeVec
}

// BGPMetrics describe the node's BGP sessions, one series per peer.
type BGPMetrics struct {
	Up        *prometheus.GaugeVec
	Since     *prometheus.GaugeVec
	Drops     *prometheus.CounterVec
	Announced *prometheus.GaugeVec
	BFDUp     *prometheus.GaugeVec
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
		VIPHeld: &HeldCollector{desc: prometheus.NewDesc(prometheus.BuildFQName(ns, sub, "vip_held"),
			"1 while this node holds the VIP (vrrp: on its interface; bgp: announced to its peers), 0 while not; one series per VIP of the cluster, so that the sum over the nodes is its holders.",
			[]string{"vip", "via"}, nil)},
		SyncFailing: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "sync_failing",
			Help: "1 while the last sync failed and the node runs its last good config (the reason is in failures_total and the ConfigKept Event)."}),
		APIReachable: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "api_reachable",
			Help: "1 while the API answered the sidecar's last probe of /readyz (every 30 s), 0 while it did not."}),
		Drained: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "drained",
			Help: "1 while the node's drain file says drained: keepalived runs at the drained priority and hands its VIPs to peers."}),
		DaemonRestarts: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "daemon_restarts_total",
			Help: "Times keepalived or haproxy was found running under a new PID (its container restarted), as the sidecar looks every minute and on every address change."}, []string{"daemon"}),
		ConfigInvalid: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "config_invalid",
			Help: "1 while the vipctl ConfigMap does not hold a valid config (its last valid pools stay in force)."}),
		StaticDrift: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "static_config_drift",
			Help: "1 while the ConfigMap's static parts differ from this node's file (a MachineConfig rollout is pending)."}),
		UnknownFields: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "config_unknown_fields",
			Help: "Fields of a copy of the config (object configmap: the vipctl ConfigMap; file: this node's cluster.yaml) that a newer vipctl wrote and this one ignores (Event ConfigFieldsUnknown): during an upgrade or after a rollback."}, []string{"object"}),
		Lonely: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "instances_without_peer",
			Help: "VRRP instances left out of this node's config because it is their only eligible node."}),
		Unannounced: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "services_not_announced",
			Help: "externalTrafficPolicy Local Services left out because no VRRP ID is free; their VIPs are not announced."}),
		ProxyPending: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "local_services_proxy_pending",
			Help: "externalTrafficPolicy Local Services with a ready endpoint on this node that the node's service proxy (its health check node port) counts no local endpoint of yet: held here at priority 1 until it does."}),
		InterfaceMissing: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "vip_interface_missing",
			Help: "1 per service pool or IngressController whose VIPs live on an interface of their own (interface, interfaceLabel) that this node lacks: the node holds none of them (Event VIPInterfaceMissing)."}, []string{"owner"}),
		LastGood: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "last_good_sync_timestamp_seconds",
			Help: "When the files last matched the cluster."}),
		SyncSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "sync_duration_seconds",
			Help: "Time to render, check and apply.", Buckets: prometheus.ExponentialBuckets(0.005, 2, 12)}),
		BGP: BGPMetrics{
			Up: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: "bgp", Name: "session_up",
				Help: "1 while the BGP session to the peer is Established."}, []string{"peer"}),
			Since: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: "bgp", Name: "session_state_since_timestamp_seconds",
				Help: "When the BGP session entered its current state."}, []string{"peer"}),
			Drops: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: "bgp", Name: "session_drops_total",
				Help: "Times the BGP session went down (bgpd's count)."}, []string{"peer"}),
			Announced: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: "bgp", Name: "announced_prefixes",
				Help: "Routes announced to the peer."}, []string{"peer"}),
			BFDUp: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: "bgp", Name: "bfd_up",
				Help: "1 while the peer's BFD session is up; only peers with BFD."}, []string{"peer"}),
		},
		VRRP: VRRPMetrics{
			Received: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: "vrrp", Name: "adverts_received_total",
				Help: "VRRP advertisements that arrived on the node's VRRP interface, any router's (this node's own are not heard)."}, []string{"family"}),
			Foreign: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: "vrrp", Name: "foreign_adverts_total",
				Help: fmt.Sprintf("VRRP advertisements carrying one of this cluster's VRRP IDs from an address that is no member of its instances: a router outside the cluster uses the ID. At most %d series are told apart; later sources count under source %q.", foreignSeriesMax, foreignOtherSource)}, []string{"vrid", "family", "source"}),
			ForeignLastSeen: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: "vrrp", Name: "foreign_advert_last_seen_timestamp_seconds",
				Help: "When the last foreign_adverts_total advert of the series arrived."}, []string{"vrid", "family", "source"}),
			ClashProposed: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: "vrrp", Name: "clash_proposed_vrid",
				Help: "The VRRP ID proposed for the instance key, whose ID vrid a router outside the cluster has advertised for longer than the sidecar waits (5 min): free on the segment as far as this node has heard, and clear of the cluster's other IDs (Event VRRPIDProposed). No series while no clash lasts."}, []string{"key", "vrid"}),
		},
		Wire: WireMetrics{
			Answerers: newAnswerCollector(prometheus.BuildFQName(ns, "wire", "vip_answerers"),
				"Link-layer addresses that answer ARP (IPv4) or neighbour solicitations (IPv6) for the VIP as this node last asked on its VRRP interface, this node included while it has the VIP: 1 is healthy; 0 while a node holds the VIP, or 2 and more, are faults (VipctlVIPUnanswered, VipctlVIPAnsweredTwice).", false),
			Strangers: newAnswerCollector(prometheus.BuildFQName(ns, "wire", "vip_stranger_answerers"),
				"Link-layer addresses that answered for the VIP as this node last asked and belong to no member of its instance (VipctlVIPAnsweredByStranger); no series while none does.", true),
			Questions: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: "wire", Name: "questions_total",
				Help: "ARP requests and neighbour solicitations this node sent to learn who answers for its VIPs (--wire-rate bounds them)."}),
			PassSeconds: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: "wire", Name: "last_pass_seconds",
				Help: "How long the last complete pass over this node's VIPs took (--wire-rate paces it)."}),
		},
		Heal: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: "heal", Name: "actions_total",
			Help: "What this node did because the other members of an instance it held heard nobody answer for a VIP: reannounce (gratuitous ARP / neighbour advertisements), step-down (its priority there 1, a heard member takes over), step-down-ended (eligible again after the hold)."}, []string{"action"}),
	}
	// Each action's series from the start, at 0: the alert on a step-down
	// reads its increase, which a series born at 1 would not show.
	for _, action := range []string{"reannounce", "step-down", "step-down-ended"} {
		m.Heal.WithLabelValues(action)
	}
	if reg != nil {
		reg.MustRegister(m.Renders, m.Reloads, m.Failures, m.WatchErrors, m.WatchEvents, m.VIPsHeld, m.VIPHeld, m.SyncFailing, m.APIReachable, m.Drained, m.DaemonRestarts, m.ConfigInvalid, m.StaticDrift, m.UnknownFields, m.LastGood, m.Lonely, m.Unannounced, m.ProxyPending, m.InterfaceMissing, m.SyncSeconds,
			m.BGP.Up, m.BGP.Since, m.BGP.Drops, m.BGP.Announced, m.BGP.BFDUp,
			m.VRRP.Received, m.VRRP.Foreign, m.VRRP.ForeignLastSeen, m.VRRP.ClashProposed,
			m.Wire.Answerers, m.Wire.Strangers, m.Wire.Questions, m.Wire.PassSeconds, m.Heal)
	}
	return m
}

// observeSessions sets the per-peer series from the sessions just read
// and drops those of peers gone; prev is the previous read, whose drop
// counts the counter continues from.
func (m *Metrics) observeSessions(prev, now v1alpha1.BGPSessions) {
	before := make(map[string]v1alpha1.BGPSession, len(prev))
	for _, s := range prev {
		before[s.Peer] = s
	}
	seen := map[string]bool{}
	for _, s := range now {
		seen[s.Peer] = true
		m.BGP.Up.WithLabelValues(s.Peer).Set(b2f(s.Established()))
		m.BGP.Since.WithLabelValues(s.Peer).Set(float64(s.Since.Unix()))
		m.BGP.Announced.WithLabelValues(s.Peer).Set(float64(s.PrefixesSent))
		if s.BFD != "" {
			m.BGP.BFDUp.WithLabelValues(s.Peer).Set(b2f(strings.EqualFold(s.BFD, "up")))
		} else {
			m.BGP.BFDUp.DeleteLabelValues(s.Peer)
		}
		drops := m.BGP.Drops.WithLabelValues(s.Peer)
		if d := s.Dropped - before[s.Peer].Dropped; d > 0 {
			// A bgpd restart starts its count again: nothing to add then.
			drops.Add(float64(d))
		}
	}
	for _, s := range prev {
		if !seen[s.Peer] {
			for _, v := range []interface{ DeleteLabelValues(...string) bool }{m.BGP.Up, m.BGP.Since, m.BGP.Announced, m.BGP.BFDUp, m.BGP.Drops} {
				v.DeleteLabelValues(s.Peer)
			}
		}
	}
}

// HeldCollector is vip_held: a series per VIP of the cluster, made at
// each scrape from the VIPs of the last render and those held at the
// last look. A GaugeVec would keep a labelled series object per VIP
// between scrapes: 3 MiB at 5000 Services, on every node (issue 51).
type HeldCollector struct {
	desc  *prometheus.Desc
	mu    sync.Mutex
	known map[netip.Addr]v1alpha1.InstanceKey
	held  map[string]bool
}

// Set records the VIPs of the cluster (known, by instance key; the map is
// read, never written) and those this node holds.
func (c *HeldCollector) Set(known map[netip.Addr]v1alpha1.InstanceKey, held v1alpha1.HeldVIPs) {
	on := make(map[string]bool, len(held))
	for _, h := range held {
		on[h.Address] = true
	}
	c.mu.Lock()
	c.known, c.held = known, on
	c.mu.Unlock()
}

// Describe is prometheus.Collector's.
func (c *HeldCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect is prometheus.Collector's: via is bgp for a bgp pool's address
// (which may have many holders), vrrp otherwise.
func (c *HeldCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	known, held := c.known, c.held
	c.mu.Unlock()
	for a, key := range known {
		via := "vrrp"
		if _, bgp := key.BGPPool(); bgp {
			via = "bgp"
		}
		addr := a.String()
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, b2f(held[addr]), addr, via)
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
