package manifests

import (
	"slices"
	"strconv"
	"strings"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/version"
)

// AlertsName names the PrometheusRule.
const AlertsName = "vipctl-alerts"

// ForeignRecent is how long, in seconds, VipctlForeignVRRPRouter keeps
// firing after a foreign router's last advert.
const ForeignRecent = 180

// RunbookBase is where each alert's runbook_url points: its section of
// docs/alerts.md, whose headings are the alert names, as the release this
// vipctl is or follows has it (a tag-pinned URL: the runbook of the
// alerts that release renders, not whatever main says later).
func RunbookBase() string {
	return "https://github.com/vipctl/vipctl/blob/" + version.Release() + "/docs/alerts.md#"
}

// Alert severities, as OpenShift's own alerts use them.
const (
	severityCritical = "critical"
	severityWarning  = "warning"
	severityInfo     = "info"
)

// Alert is one alerting rule of the PrometheusRule. Each has a section in
// docs/alerts.md (TestAlertsDocumented) and cases in
// testdata/alerts.promtool.yaml (TestAlertsPromtool).
type Alert struct {
	Name     string
	Expr     string
	For      time.Duration
	Severity string
	Summary  string
	// Description may use the series' labels ({{ $labels.vip }}).
	Description string
}

// Alerts are vipctl's alerting rules. Their series come from the
// sidecars (vipctl_runtimecfg_*, vipctl_bgp_*, vipctl_vrrp_*), the allocator
// (vipctl_allocator_*) and Prometheus's own up for the scrape targets of
// the ServiceMonitors in Monitoring; the `node` label is the relabelling
// of the sidecars' ServiceMonitor.
func Alerts() []Alert {
	return slices.Concat(vipAlerts(), sidecarAlerts(), bgpAlerts(), allocatorAlerts(), daemonAlerts())
}

// vipAlerts are the alerts on the VIPs themselves: held by nobody, by several nodes, answered on the wire by nobody or by two, or contested by a router outside the cluster.
func vipAlerts() []Alert {
	return []Alert{
		{
			Name:        "VipctlVIPNotHeld",
			Expr:        vipHolders + ` == 0`,
			For:         time.Minute,
			Severity:    severityCritical,
			Summary:     "A VIP is held by no node.",
			Description: "{{ $labels.vip }} ({{ $labels.via }}) is on no node's interface and announced by none: its clients reach nothing.",
		},
		{
			Name:        "VipctlVIPSplitBrain",
			Expr:        vrrpHolders + ` > 1`,
			For:         time.Minute,
			Severity:    severityCritical,
			Summary:     "A VRRP VIP is held by more than one node.",
			Description: "{{ $labels.vip }} is on {{ $value }} nodes at once (split brain): the VRRP adverts between them are lost, and connections break as the switches' ARP/ND caches flip.",
		},
		{
			// The wire's view (issue 54): every member of a VIP's
			// instance asks who answers for it, and knows the members'
			// link-layer addresses (their answers for their own).
			Name:        "VipctlVIPAnsweredByStranger",
			Expr:        `max by (vip) (vipctl_wire_vip_stranger_answerers) > 0`,
			For:         time.Minute,
			Severity:    severityCritical,
			Summary:     "A host that is no member of a VIP's instance answers for it.",
			Description: "{{ $labels.vip }} is answered by a link-layer address that belongs to no member of its instance when a node asks who has it (ARP/ND): the segment's hosts and routers send some or all of its traffic there. The Node's VIPAnsweredByStranger Event names the address.",
		},
		{
			// Two answering in any node's view is a fault; where the
			// books show two holders, VipctlVIPSplitBrain says it, and
			// where one answerer is a stranger, the alert above (one
			// alert per fault).
			Name:        "VipctlVIPAnsweredTwice",
			Expr:        `max by (vip) (vipctl_wire_vip_answerers) > 1 unless on (vip) ` + vrrpHolders + ` > 1 unless on (vip) max by (vip) (vipctl_wire_vip_stranger_answerers) > 0`,
			For:         time.Minute,
			Severity:    severityCritical,
			Summary:     "More than one host answers for a VIP on its segment.",
			Description: "{{ $labels.vip }} is answered by {{ $value }} link-layer addresses when a node asks who has it (ARP/ND): the segment's hosts and routers flip between them and connections break. No second node holds it as far as the cluster's books know, and no answerer is known to be a stranger: a member whose sidecar does not publish, or a stranger while a member does not answer for its own address.",
		},
		{
			// The holder's own view counts itself: only the other
			// members' views tell whether the wire hears it. A VIP no
			// node holds is VipctlVIPNotHeld's.
			Name:        "VipctlVIPUnanswered",
			Expr:        `max by (vip) (vipctl_wire_vip_answerers unless on (vip, node) (vipctl_runtimecfg_vip_held == 1)) == 0 and on (vip) ` + vrrpHolders + ` >= 1`,
			For:         time.Minute,
			Severity:    severityCritical,
			Summary:     "A held VIP is answered by nobody on its segment.",
			Description: "{{ $labels.vip }} is on a node's interface, yet no other member of its instance hears an answer when it asks who has it (ARP/ND): clients on the segment cannot reach it, while VRRP and the books look healthy.",
		},
		{
			// The healing of VipctlVIPUnanswered's fault moves the VIPs
			// away within about half a minute, before that alert fires:
			// this one keeps the node's fault in sight for an hour.
			Name:        "VipctlVIPHolderSteppedDown",
			Expr:        `sum by (node) (increase(vipctl_heal_actions_total{action="step-down"}[60m])) > 0`,
			For:         time.Minute,
			Severity:    severityWarning,
			Summary:     "A node gave up VIPs that the other members could not hear it answer for.",
			Description: "{{ $labels.node }} held VIPs that no other member of their instance heard answered on the wire, even after it announced them again, and stepped down so that a member they hear took them over (VIPSteppedDown Event on the Node). Its answers do not reach the segment: the fault stays on the node.",
		},
		{
			Name: "VipctlForeignVRRPRouter",
			// Heard within 3 minutes, for 5: a router that keeps
			// advertising, not the odd advert of a node that joined
			// before the sidecars knew it. The value is how many nodes
			// hear it.
			Expr:        `count by (vrid, family, source) (time() - vipctl_vrrp_foreign_advert_last_seen_timestamp_seconds < ` + strconv.Itoa(ForeignRecent) + `)`,
			For:         5 * time.Minute,
			Severity:    severityWarning,
			Summary:     "A router outside the cluster advertises one of its VRRP IDs.",
			Description: "{{ $labels.source }} advertises VRRP ID {{ $labels.vrid }} ({{ $labels.family }}), which this cluster uses, and is no member of its instance; {{ $value }} node(s) hear it. VRRP routers sharing an ID on one segment disturb each other: a multicast cluster may lose a VIP to it.",
		},
	}
}

// sidecarAlerts are the alerts on a node's sidecar: its config, its interfaces, its reach to the API and its metrics.
func sidecarAlerts() []Alert {
	return []Alert{
		{
			Name:        "VipctlConfigKept",
			Expr:        `vipctl_runtimecfg_sync_failing == 1`,
			For:         10 * time.Minute,
			Severity:    severityWarning,
			Summary:     "A node keeps its last good config.",
			Description: "The sidecar on {{ $labels.node }} could not apply the cluster's current state (a daemon refused the rendered config, or it could not be written) and runs its last good config: changes since do not take effect there.",
		},
		{
			Name:        "VipctlVIPInterfaceMissing",
			Expr:        `vipctl_runtimecfg_vip_interface_missing == 1`,
			For:         10 * time.Minute,
			Severity:    severityWarning,
			Summary:     "A node lacks the interface a pool's or IngressController's VIPs live on.",
			Description: "{{ $labels.node }} has no interface for the VIPs of {{ $labels.owner }} (interface, interfaceLabel): it holds none of them, so fewer nodes can.",
		},
		{
			Name:        "VipctlConfigInvalid",
			Expr:        `max by (namespace, job) (vipctl_runtimecfg_config_invalid == 1 or vipctl_allocator_config_invalid == 1)`,
			For:         5 * time.Minute,
			Severity:    severityWarning,
			Summary:     "vipctl's live config is invalid.",
			Description: "The live config (the vipctl-config ConfigMap, or the ClusterVIPs object after vipctl migrate) does not validate; the sidecars and the allocator keep its last valid pools.",
		},
		{
			Name: "VipctlSidecarAPIUnreachable",
			// A sidecar that cannot reach the API cannot authorize its
			// scraper either once its cache expires: then its target is
			// down (VipctlMetricsDown) and this alert ends with the data.
			// Failed watches alone miss an apiserver that refuses
			// connections (client-go retries those quietly): the
			// sidecar's probe of /readyz tells.
			Expr:        `sum by (node) (increase(vipctl_runtimecfg_watch_errors_total[5m])) > 0 or max by (node) (vipctl_runtimecfg_api_reachable) == 0`,
			For:         5 * time.Minute,
			Severity:    severityWarning,
			Summary:     "A sidecar cannot reach the API.",
			Description: "The sidecar on {{ $labels.node }} fails to list or watch the cluster, or the API does not answer its probe: it renders from what it last saw and cannot publish the VIPs it holds.",
		},
		{
			Name:        "VipctlMetricsDown",
			Expr:        `up{job=~"` + NodeMetricsName + `|` + AllocatorMetricsName + `"} == 0`,
			For:         10 * time.Minute,
			Severity:    severityWarning,
			Summary:     "A vipctl metrics endpoint cannot be scraped.",
			Description: "{{ $labels.job }} on {{ $labels.instance }} does not answer the scrape: the process is down, or it cannot reach the API to authorize the scraper. Alerts on its series are blind meanwhile.",
		},
	}
}

// bgpAlerts are the alerts on BGP and BFD sessions.
func bgpAlerts() []Alert {
	return []Alert{
		{
			Name:        "VipctlBGPSessionDown",
			Expr:        `vipctl_bgp_session_up == 0`,
			For:         5 * time.Minute,
			Severity:    severityWarning,
			Summary:     "A BGP session of a node is down.",
			Description: "The BGP session from {{ $labels.node }} to {{ $labels.peer }} is not Established: that router does not learn the node's bgp pool routes.",
		},
		{
			Name:        "VipctlBFDPeerDown",
			Expr:        `vipctl_bgp_bfd_up == 0`,
			For:         time.Minute,
			Severity:    severityWarning,
			Summary:     "A BFD session of a node is down.",
			Description: "BFD from {{ $labels.node }} to {{ $labels.peer }} is down: the path to that router fails, or the router's BFD is off.",
		},
	}
}

// allocatorAlerts are the alerts on the allocator's pools.
func allocatorAlerts() []Alert {
	return []Alert{
		{
			Name:        "VipctlPoolExhausted",
			Expr:        leaderSeries("vipctl_allocator_addresses_in_use", "pool") + ` >= on (pool) max by (pool) (vipctl_allocator_pool_size)`,
			For:         5 * time.Minute,
			Severity:    severityWarning,
			Summary:     "A service pool has no free address.",
			Description: "Pool {{ $labels.pool }} has given out every address: the next LoadBalancer Service asking for it stays pending.",
		},
		{
			Name:        "VipctlNamespaceAtCap",
			Expr:        `sum by (reason) (increase(vipctl_allocator_failures_total{reason="NamespaceLimit"}[15m])) > 0`,
			For:         time.Minute,
			Severity:    severityInfo,
			Summary:     "A namespace reached a pool's maxPerNamespace.",
			Description: "The allocator refused addresses because a namespace holds its pool's maxPerNamespace already (the Services' AllocationFailed Events name it).",
		},
	}
}

// daemonAlerts are the alerts on the daemons a node runs, and a drain left in place.
func daemonAlerts() []Alert {
	return []Alert{
		{
			Name: "VipctlDaemonRestarting",
			// The sidecar sees a new PID at the latest a minute after a
			// restart; CrashLoopBackOff spaces them 10 s to 5 min apart.
			Expr:        `increase(vipctl_runtimecfg_daemon_restarts_total[30m]) > 2`,
			For:         5 * time.Minute,
			Severity:    severityWarning,
			Summary:     "keepalived or haproxy restarts repeatedly.",
			Description: "{{ $labels.daemon }} on {{ $labels.node }} restarted more than twice in 30 minutes: each keepalived restart moves the node's VIPs away and back, each haproxy restart drops the API connections through it.",
		},
		{
			Name:        "VipctlNodeDrainedTooLong",
			Expr:        `vipctl_runtimecfg_drained == 1`,
			For:         2 * time.Hour,
			Severity:    severityWarning,
			Summary:     "A node has been drained for over two hours.",
			Description: "{{ $labels.node }} has been drained for two hours: it holds no VIP and takes none over, so its peers carry them alone.",
		},
	}
}

// PrometheusRule carries Alerts for the stack's Prometheus.
func PrometheusRule(c *v1alpha1.ClusterVIPs) *monitoringv1.PrometheusRule {
	m := meta(AlertsName, "monitoring")
	for k, v := range c.Spec.MonitoringLabels() {
		m.Labels[k] = v
	}
	var rules []monitoringv1.Rule
	for _, a := range Alerts() {
		rules = append(rules, monitoringv1.Rule{
			Alert:  a.Name,
			Expr:   intstr.FromString(a.Expr),
			For:    ptr.To(monitoringv1.Duration(promDuration(a.For))),
			Labels: map[string]string{"severity": a.Severity},
			Annotations: map[string]string{
				"summary":     a.Summary,
				"description": a.Description,
				"runbook_url": RunbookBase() + strings.ToLower(a.Name),
			},
		})
	}
	return &monitoringv1.PrometheusRule{
		TypeMeta:   tm(monitoringv1.SchemeGroupVersion.String(), monitoringv1.PrometheusRuleKind),
		ObjectMeta: m,
		Spec:       monitoringv1.PrometheusRuleSpec{Groups: []monitoringv1.RuleGroup{{Name: "vipctl", Rules: rules}}},
	}
}

// promDuration writes d as Prometheus durations are written: 90s, 5m, 2h.
func promDuration(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return strings.TrimSuffix(d.String(), "0m0s")
	case d%time.Minute == 0:
		return strings.TrimSuffix(d.String(), "0s")
	default:
		return d.String()
	}
}
