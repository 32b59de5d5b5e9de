package allocator

import (
	"math/big"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
)

// Metrics are the allocator's Prometheus metrics.
type Metrics struct {
	Allocations   prometheus.Counter
	Failures      *prometheus.CounterVec
	WatchErrors   *prometheus.CounterVec
	InUse         *prometheus.GaugeVec
	Size          *prometheus.GaugeVec
	Leader        prometheus.Gauge
	ConfigInvalid prometheus.Gauge
	// UnknownFields counts the ConfigMap's fields a newer vipctl wrote
	// and this one ignores.
	UnknownFields prometheus.Gauge
	// NamespaceServices and MaxPerNamespace show how near each
	// namespace is to its pools' maxPerNamespace (pools with one only).
	NamespaceServices *prometheus.GaugeVec
	MaxPerNamespace   *prometheus.GaugeVec
	// Conditions are the ClusterVIPs objects' conditions as the status
	// writer last computed them (leader only).
	Conditions *prometheus.GaugeVec

	// nsSeen are the NamespaceServices series set last, so that those of
	// namespaces gone are dropped rather than left at their last count.
	nsSeen map[[2]string]bool
}

// watchedResources are what the allocator watches, as the watch_errors
// metric names them.
var watchedResources = []string{"services", "configmaps"}

// NewMetrics creates the metrics, registered with reg unless nil.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	const ns, sub = "vipctl", "allocator"
	m := &Metrics{
		Allocations: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "allocations_total", Help: "Addresses written into Service status."}),
		Failures: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "failures_total",
			Help: "Allocations refused, by reason (PoolExhausted, NotInPool, IPInUse, NoPool, PoolNotAllowed, FamilyUnavailable, BadRequest, AnchorAddress)."}, []string{"reason"}),
		WatchErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "watch_errors_total", Help: "Failed lists or watches, by resource."}, []string{"resource"}),
		InUse:       prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "addresses_in_use", Help: "Addresses held by Services, per pool."}, []string{"pool"}),
		Size:        prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "pool_size", Help: "Addresses a pool can give to Services (anchors excluded)."}, []string{"pool"}),
		Leader:      prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "leader", Help: "1 while this replica holds the Lease."}),
		ConfigInvalid: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "config_invalid",
			Help: "1 while the ConfigMap is invalid (the last valid pools stay in force)."}),
		UnknownFields: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "config_unknown_fields",
			Help: "Fields of the ConfigMap that a newer vipctl wrote and this one ignores (Event ConfigFieldsUnknown): during an upgrade or after a rollback."}),
		NamespaceServices: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "namespace_services",
			Help: "Services of a namespace holding an address of a pool with maxPerNamespace (what the cap counts); other pools are left out."}, []string{"pool", "namespace"}),
		MaxPerNamespace: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "pool_max_per_namespace",
			Help: "A pool's maxPerNamespace: the Services one namespace may have in it; pools without a cap are left out."}, []string{"pool"}),
		Conditions: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "clustervips_condition",
			Help: "The conditions of each ClusterVIPs object's status, as this replica last computed them while leading: 1 True, 0 False, one series per object, type and reason (oc get cvips)."},
			[]string{"clustervips", "type", "reason"}),
	}
	// A counter's series that appears at its first increment hides that
	// increment from increase(): the alerts on these would miss the
	// first failure.
	for _, r := range reasons {
		m.Failures.WithLabelValues(string(r))
	}
	for _, what := range watchedResources {
		m.WatchErrors.WithLabelValues(what)
	}
	if reg != nil {
		reg.MustRegister(m.Allocations, m.Failures, m.WatchErrors, m.InUse, m.Size, m.Leader, m.ConfigInvalid, m.UnknownFields, m.NamespaceServices, m.MaxPerNamespace, m.Conditions)
	}
	return m
}

func (m *Metrics) setPools(pools []v1alpha1.ServicePool) {
	m.Size.Reset()
	m.MaxPerNamespace.Reset()
	for _, p := range cluster.CompilePools(pools) {
		if p.MaxPerNamespace > 0 {
			m.MaxPerNamespace.WithLabelValues(p.Name).Set(float64(p.MaxPerNamespace))
		}
		size, _ := new(big.Float).SetInt(p.Assignable()).Float64()
		m.Size.WithLabelValues(p.Name).Set(size)
	}
}

func (c *Controller) updatePoolMetrics(t *term) {
	if time.Since(t.metricsAt) < time.Second && t.queue.Len() > 0 {
		return
	}
	t.metricsAt = time.Now()
	for pool, n := range t.alloc.InUse() {
		c.m.InUse.WithLabelValues(pool).Set(float64(n))
	}
	c.m.setNamespaceServices(t.alloc.NamespaceUsers())
}

// setNamespaceServices sets a series per pool and namespace from
// Allocator.NamespaceUsers and drops those of namespaces that hold no
// address of the pool any more.
func (m *Metrics) setNamespaceServices(users map[string]map[string]int) {
	now := map[[2]string]bool{}
	for pool, byNS := range users {
		for ns, n := range byNS {
			now[[2]string{pool, ns}] = true
			m.NamespaceServices.WithLabelValues(pool, ns).Set(float64(n))
		}
	}
	for l := range m.nsSeen {
		if !now[l] {
			m.NamespaceServices.DeleteLabelValues(l[0], l[1])
		}
	}
	m.nsSeen = now
}

// setConditions replaces the condition series with those of byObject
// (object name → its status conditions): an object deleted, or a
// condition's reason changed, leaves no series behind.
func (m *Metrics) setConditions(byObject map[string][]metav1.Condition) {
	m.Conditions.Reset()
	for name, conds := range byObject {
		for _, c := range conds {
			v := 0.0
			if c.Status == metav1.ConditionTrue {
				v = 1
			}
			m.Conditions.WithLabelValues(name, c.Type, c.Reason).Set(v)
		}
	}
}
