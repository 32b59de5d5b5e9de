package manifests

import (
	"bytes"
	"encoding/json"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// The OpenShift console lists as a dashboard every ConfigMap in
// ConsoleDashboardNamespace with the label ConsoleDashboardLabel: "true",
// and renders the Grafana JSON of its one data key.
const (
	ConsoleDashboardNamespace = "openshift-config-managed"
	ConsoleDashboardLabel     = "console.openshift.io/dashboard"
	// DashboardName names the ConfigMap; DashboardKey is its data key.
	DashboardName = "vipctl-dashboard"
	DashboardKey  = "vipctl.json"
	// DashboardUID is the dashboard's uid in Grafana: importing a newer
	// version replaces the older one.
	DashboardUID = "vipctl"
)

// DashboardFlavor is who renders the dashboard: the two understand
// different panel types and layouts of the same Grafana JSON.
type DashboardFlavor int

const (
	// ConsoleFlavor is the OpenShift console's Grafana-compatible
	// renderer (the monitoring plugin's "legacy" dashboards): panel types
	// graph, singlestat, gauge, table, grafana-piechart-panel and rows
	// only; widths as span on a 12-column grid; units in yaxes[0].format
	// (graph) and format (singlestat); no data source choice.
	ConsoleFlavor DashboardFlavor = iota
	// GrafanaFlavor is Grafana 8 and later: timeseries and stat panels
	// (graph and singlestat are the AngularJS panels Grafana 11 disables
	// and 12 removed), gridPos on 24 columns, a data source variable.
	GrafanaFlavor
)

// Dashboard is the subset of Grafana's dashboard JSON vipctl writes.
type Dashboard struct {
	UID           string     `json:"uid"`
	Title         string     `json:"title"`
	Description   string     `json:"description"`
	Tags          []string   `json:"tags"`
	Editable      bool       `json:"editable"`
	SchemaVersion int        `json:"schemaVersion"`
	Time          TimeRange  `json:"time"`
	Refresh       string     `json:"refresh"`
	Templating    Templating `json:"templating"`
	Panels        []Panel    `json:"panels"`
}

// TimeRange is the dashboard's default time range.
type TimeRange struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// Templating holds the dashboard's variables.
type Templating struct {
	List []Variable `json:"list"`
}

// Variable is a dashboard variable; vipctl's only one picks the
// Prometheus data source in Grafana.
type Variable struct {
	Name  string `json:"name"`
	Label string `json:"label"`
	Type  string `json:"type"`
	Query string `json:"query"`
}

// DatasourceRef names a panel's data source.
type DatasourceRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// Panel is a row or a chart. The fields after Targets are each read by
// one flavor only.
type Panel struct {
	ID          int            `json:"id"`
	Type        string         `json:"type"`
	Title       string         `json:"title"`
	Description string         `json:"description,omitempty"`
	Datasource  *DatasourceRef `json:"datasource,omitempty"`
	Targets     []Target       `json:"targets,omitempty"`

	// Console: the row's title is shown (with a toggle) only with
	// showTitle; span is the width in twelfths.
	ShowTitle bool   `json:"showTitle,omitempty"`
	Span      int    `json:"span,omitempty"`
	Yaxes     []Axis `json:"yaxes,omitempty"`
	Legend    *Show  `json:"legend,omitempty"`
	Stack     bool   `json:"stack,omitempty"`
	Format    string `json:"format,omitempty"`

	// Grafana.
	GridPos     *GridPos      `json:"gridPos,omitempty"`
	Collapsed   *bool         `json:"collapsed,omitempty"`
	FieldConfig *FieldConfig  `json:"fieldConfig,omitempty"`
	Options     *PanelOptions `json:"options,omitempty"`
}

// Target is one PromQL query of a panel.
type Target struct {
	RefID string `json:"refId"`
	Expr  string `json:"expr"`
	// LegendFormat names each series, {{label}} replaced by its value.
	LegendFormat string `json:"legendFormat,omitempty"`
}

// Axis is a console graph's y axis: its unit.
type Axis struct {
	Format string `json:"format"`
	Show   bool   `json:"show"`
}

// Show switches a console graph's legend on.
type Show struct {
	Show bool `json:"show"`
}

// GridPos places a Grafana panel on its 24-column grid.
type GridPos struct {
	H int `json:"h"`
	W int `json:"w"`
	X int `json:"x"`
	Y int `json:"y"`
}

// FieldConfig holds a Grafana panel's unit, thresholds and stacking.
type FieldConfig struct {
	Defaults  FieldDefaults `json:"defaults"`
	Overrides []struct{}    `json:"overrides"`
}

// FieldDefaults are the settings of every series of a Grafana panel.
type FieldDefaults struct {
	Unit       string        `json:"unit,omitempty"`
	Min        *float64      `json:"min,omitempty"`
	Thresholds *Thresholds   `json:"thresholds,omitempty"`
	Custom     *FieldCustoms `json:"custom,omitempty"`
}

// FieldCustoms are a timeseries panel's drawing settings.
type FieldCustoms struct {
	Stacking    *Stacking `json:"stacking,omitempty"`
	FillOpacity int       `json:"fillOpacity"`
}

// Stacking stacks a timeseries panel's series.
type Stacking struct {
	Mode  string `json:"mode"`
	Group string `json:"group"`
}

// Thresholds colour a Grafana stat by its value.
type Thresholds struct {
	Mode  string      `json:"mode"`
	Steps []Threshold `json:"steps"`
}

// Threshold is a colour from a value up; the first step has no value
// (from minus infinity). The console reads the same shape from
// options.fieldOptions.thresholds.
type Threshold struct {
	Color string   `json:"color"`
	Value *float64 `json:"value"`
}

// PanelOptions are a panel's options: Grafana's legend, tooltip and
// reduction, or the console singlestat's thresholds.
type PanelOptions struct {
	Legend        *GrafanaLegend `json:"legend,omitempty"`
	Tooltip       *Tooltip       `json:"tooltip,omitempty"`
	ReduceOptions *Reduce        `json:"reduceOptions,omitempty"`
	ColorMode     string         `json:"colorMode,omitempty"`
	GraphMode     string         `json:"graphMode,omitempty"`
	FieldOptions  *FieldOptions  `json:"fieldOptions,omitempty"`
}

// GrafanaLegend places a timeseries panel's legend.
type GrafanaLegend struct {
	ShowLegend  bool   `json:"showLegend"`
	DisplayMode string `json:"displayMode"`
	Placement   string `json:"placement"`
}

// Tooltip lists every series at the pointer, not just the nearest.
type Tooltip struct {
	Mode string `json:"mode"`
}

// Reduce makes a stat show its query's last value.
type Reduce struct {
	Calcs  []string `json:"calcs"`
	Fields string   `json:"fields"`
	Values bool     `json:"values"`
}

// FieldOptions carries the console singlestat's thresholds.
type FieldOptions struct {
	Thresholds []Threshold `json:"thresholds"`
}

// Queries that alerts and panels share: one expression, one meaning.
const (
	// vipHolders is how many nodes hold each VIP: every sidecar exports
	// every VIP of the cluster, 0 or 1.
	vipHolders = `sum by (vip, via) (vipctl_runtimecfg_vip_held)`
	// vrrpHolders is the same for the VRRP VIPs, which only split brain
	// puts on two nodes (a bgp VIP is announced from several on purpose).
	vrrpHolders = `sum by (vip) (vipctl_runtimecfg_vip_held{via="vrrp"})`
)

// leaderSeries is an allocator series as its leading replica counts it,
// by the labels by: a standby's are those of its last term.
func leaderSeries(metric, by string) string {
	return `max by (` + by + `) (` + metric + ` and on (pod) (vipctl_allocator_leader == 1))`
}

// panelKind is what a chart shows: the flavors name it differently.
type panelKind int

const (
	timeSeries panelKind = iota
	stat
)

// chart is one panel of the dashboard, before a flavor lays it out.
type chart struct {
	kind        panelKind
	title       string
	description string
	// width in twelfths of the dashboard's width.
	width int
	// unit is a Grafana unit id (the console formats the same ids).
	unit    string
	stack   bool
	queries []Target
	// badFrom colours a stat red from this value up (0: no colour).
	badFrom float64
}

type section struct {
	title  string
	charts []chart
}

func q(expr, legend string) Target { return Target{Expr: expr, LegendFormat: legend} }

// orZero makes a count of bad things show 0, not "no data", when there
// are none.
func orZero(expr string) string { return expr + ` or vector(0)` }

// dashboardSections are the panels of vipctl's dashboard. Every query
// reads series the sidecars or the allocator export as the
// ServiceMonitors of Monitoring label them (node: the sidecar's node; pod:
// the allocator replica); TestDashboardQueries holds them to it.
func dashboardSections() []section {
	// Windows are fixed, not $__rate_interval: the console knows only its
	// own variables.
	return slices.Concat(vipSections(), objectSections(), operationSections())
}

// objectSections are the dashboard's section on the ClusterVIPs status
// (docs/api.md, "Status"): the verdict GitOps tools read, as the
// allocator's leader computed it.
func objectSections() []section {
	cond := func(typ string) string {
		return leaderSeries(`vipctl_allocator_clustervips_condition{type="`+typ+`"}`, "clustervips, type, reason")
	}
	return []section{
		{title: "ClusterVIPs status (oc get cvips)", charts: []chart{
			{kind: stat, title: "Objects not Ready", width: 3, unit: "short", badFrom: 1,
				description: "ClusterVIPs objects whose Ready condition is False: a VIP without holder, or nodes not running the object's spec (reason on the right).",
				queries:     []Target{q(orZero(`count(`+cond("Ready")+` == 0)`), "")}},
			{kind: stat, title: "Objects Degraded", width: 3, unit: "short", badFrom: 1,
				description: "ClusterVIPs objects whose Degraded condition is True: split brain, no holder, a spec vipctl refuses, nodes away, a pool full.",
				queries:     []Target{q(orZero(`count(`+cond("Degraded")+` == 1)`), "")}},
			{kind: timeSeries, title: "Why: Ready False and Degraded True, by reason", width: 6, unit: "short", stack: true,
				description: "The reasons of the conditions that are not as they should be; the object's status message (oc describe cvips) names the VIPs and nodes.",
				queries: []Target{
					q(cond("Ready")+` == 0`, "{{clustervips}} not Ready: {{reason}}"),
					q(cond("Degraded")+` == 1`, "{{clustervips}} Degraded: {{reason}}"),
				}},
		}},
	}
}

// vipSections are the dashboard's sections on the VIPs and the VRRP segment they live on.
func vipSections() []section {
	return []section{
		{title: "VIPs", charts: []chart{
			{kind: stat, title: "VIPs", width: 3, unit: "short",
				description: "VIPs of the cluster (API, ingress, service pools).",
				queries:     []Target{q(`count(count by (vip) (vipctl_runtimecfg_vip_held))`, "")}},
			{kind: stat, title: "VIPs held by no node", width: 3, unit: "short", badFrom: 1,
				description: "Their clients reach nothing (alert VipctlVIPNotHeld).",
				queries:     []Target{q(orZero(`count(`+vipHolders+` == 0)`), "")}},
			{kind: stat, title: "VRRP VIPs on two nodes or more", width: 3, unit: "short", badFrom: 1,
				description: "Split brain (alert VipctlVIPSplitBrain).",
				queries:     []Target{q(orZero(`count(`+vrrpHolders+` > 1)`), "")}},
			{kind: stat, title: "Nodes drained", width: 3, unit: "short",
				description: "Nodes that hold no VIP and take none over (vipctl drain).",
				queries:     []Target{q(orZero(`sum(vipctl_runtimecfg_drained)`), "")}},
			{kind: timeSeries, title: "Holders per VIP", width: 6, unit: "short",
				description: "1 is right for every VIP: 0 is a VIP nobody serves, 2 or more a VRRP split brain (bgp VIPs: every announcing node).",
				queries:     []Target{q(vipHolders, "{{vip}} ({{via}})")}},
			{kind: timeSeries, title: "Which node holds each VIP", width: 6, unit: "short", stack: true,
				description: "One band per VIP and holder: a change of colour under a VIP is a failover.",
				queries:     []Target{q(`max by (vip, node) (vipctl_runtimecfg_vip_held) == 1`, "{{vip}} on {{node}}")}},
			{kind: timeSeries, title: "Failovers: takeovers per VIP (10 min)", width: 12, unit: "short",
				description: "Times a node became a VIP's holder in the last 10 minutes (a holder letting go is not counted: a node that dies says nothing).",
				queries: []Target{q(`sum by (vip) (changes(vipctl_runtimecfg_vip_held[10m]) - resets(vipctl_runtimecfg_vip_held[10m])) > 0`,
					"{{vip}}")}},
		}},
		{title: "VRRP neighbourhood", charts: []chart{
			{kind: timeSeries, title: "Foreign routers using this cluster's VRRP IDs (10 min)", width: 6, unit: "short",
				description: "Adverts carrying one of the cluster's IDs from an address that is no member of its instances, as the nodes hear them (alert VipctlForeignVRRPRouter).",
				queries:     []Target{q(`sum by (vrid, source) (increase(vipctl_vrrp_foreign_adverts_total[10m])) > 0`, "ID {{vrid}} from {{source}}")}},
			{kind: timeSeries, title: "Nodes lacking a VIP interface", width: 6, unit: "short", stack: true,
				description: "A node a pool or IngressController selects has no interface for its VIPs (interface, interfaceLabel) and holds none of them (alert VipctlVIPInterfaceMissing).",
				queries:     []Target{q(`vipctl_runtimecfg_vip_interface_missing == 1`, "{{node}}: {{owner}}")}},
		}},
	}
}

// operationSections are its sections on the machinery: config, reloads, BGP and the service pools.
func operationSections() []section {
	return []section{
		{title: "Config", charts: []chart{
			{kind: timeSeries, title: "Nodes running their last good config", width: 4, unit: "short", stack: true,
				description: "A daemon refused the rendered config, or it could not be written: changes since do not take effect there (alert VipctlConfigKept).",
				queries:     []Target{q(`vipctl_runtimecfg_sync_failing == 1`, "{{node}}")}},
			{kind: timeSeries, title: "Config rejections by reason (10 min)", width: 4, unit: "short",
				description: "Syncs that kept the last good config, by step (config, render, apply, write, publish...).",
				queries:     []Target{q(`sum by (reason) (increase(vipctl_runtimecfg_failures_total[10m])) > 0`, "{{reason}}")}},
			{kind: timeSeries, title: "Config in force", width: 4, unit: "short",
				description: "An invalid vipctl-config ConfigMap (its last valid pools stay in force), and nodes whose static config differs from the ConfigMap's (a MachineConfig rollout pending).",
				queries: []Target{
					q(`max(vipctl_runtimecfg_config_invalid)`, "ConfigMap invalid (sidecars)"),
					q(`max(vipctl_allocator_config_invalid)`, "ConfigMap invalid (allocator)"),
					q(`sum(vipctl_runtimecfg_static_config_drift)`, "nodes awaiting a MachineConfig"),
				}},
		}},
		{title: "Reloads", charts: []chart{
			{kind: timeSeries, title: "Reloads by daemon (10 min)", width: 4, unit: "short",
				queries: []Target{q(`sum by (daemon) (increase(vipctl_runtimecfg_reloads_total[10m]))`, "{{daemon}}")}},
			{kind: timeSeries, title: "Sync duration", width: 4, unit: "s",
				description: "Render, the daemons' own config tests, write, and the reloads sent (keepalived's SIGHUP and haproxy's master-socket reload return before the daemon has reloaded).",
				queries: []Target{
					q(`histogram_quantile(0.5, sum by (le) (rate(vipctl_runtimecfg_sync_duration_seconds_bucket[10m])))`, "p50"),
					q(`histogram_quantile(0.99, sum by (le) (rate(vipctl_runtimecfg_sync_duration_seconds_bucket[10m])))`, "p99"),
				}},
			{kind: timeSeries, title: "Daemon restarts (30 min)", width: 4, unit: "short",
				description: "keepalived or haproxy found under a new PID (alert VipctlDaemonRestarting).",
				queries:     []Target{q(`sum by (node, daemon) (increase(vipctl_runtimecfg_daemon_restarts_total[30m])) > 0`, "{{daemon}} on {{node}}")}},
		}},
		{title: "BGP", charts: []chart{
			{kind: stat, title: "BGP sessions established", width: 4, unit: "short",
				queries: []Target{q(orZero(`sum(vipctl_bgp_session_up)`), "")}},
			{kind: stat, title: "BGP sessions down", width: 4, unit: "short", badFrom: 1,
				description: "Alert VipctlBGPSessionDown.",
				queries:     []Target{q(orZero(`count(vipctl_bgp_session_up == 0)`), "")}},
			{kind: stat, title: "BFD peers down", width: 4, unit: "short", badFrom: 1,
				description: "Alert VipctlBFDPeerDown.",
				queries:     []Target{q(orZero(`count(vipctl_bgp_bfd_up == 0)`), "")}},
			{kind: timeSeries, title: "Sessions and BFD peers up per node", width: 6, unit: "short",
				queries: []Target{
					q(`sum by (node) (vipctl_bgp_session_up)`, "{{node}} sessions"),
					q(`sum by (node) (vipctl_bgp_bfd_up)`, "{{node}} BFD peers"),
				}},
			{kind: timeSeries, title: "Session drops (1 h)", width: 6, unit: "short",
				queries: []Target{q(`sum by (node, peer) (increase(vipctl_bgp_session_drops_total[1h])) > 0`, "{{node}} to {{peer}}")}},
		}},
		{title: "Service pools", charts: []chart{
			{kind: timeSeries, title: "Addresses in use and pool size", width: 6, unit: "short",
				queries: []Target{
					q(leaderSeries("vipctl_allocator_addresses_in_use", "pool"), "{{pool}} in use"),
					q(`max by (pool) (vipctl_allocator_pool_size)`, "{{pool}} size"),
				}},
			{kind: timeSeries, title: "Pool usage", width: 6, unit: "percentunit",
				description: "Alert VipctlPoolExhausted at 100%.",
				queries: []Target{q(leaderSeries("vipctl_allocator_addresses_in_use", "pool")+
					` / on (pool) max by (pool) (vipctl_allocator_pool_size)`, "{{pool}}")}},
			{kind: timeSeries, title: "Services per namespace and maxPerNamespace", width: 6, unit: "short",
				description: "Pools with a maxPerNamespace only; at the cap the allocator refuses the namespace's next Service (alert VipctlNamespaceAtCap).",
				queries: []Target{
					q(leaderSeries("vipctl_allocator_namespace_services", "pool, namespace"), "{{namespace}} in {{pool}}"),
					q(`max by (pool) (vipctl_allocator_pool_max_per_namespace)`, "{{pool}} cap"),
				}},
			{kind: timeSeries, title: "Allocations refused by reason (10 min)", width: 6, unit: "short",
				queries: []Target{q(`sum by (reason) (increase(vipctl_allocator_failures_total[10m])) > 0`, "{{reason}}")}},
		}},
	}
}

// DashboardColumns is the width of Grafana's grid.
const DashboardColumns = 24

// Panel heights on Grafana's grid, in lines of 30 px.
const (
	rowHeight    = 1
	statHeight   = 4
	seriesHeight = 8
)

// NewDashboard lays vipctl's dashboard out for flavor.
func NewDashboard(flavor DashboardFlavor) Dashboard {
	d := Dashboard{
		UID:   DashboardUID,
		Title: "vipctl / VIPs",
		Description: "Who holds each VIP, failovers, config rejections, reloads, BGP sessions and service-pool usage, " +
			"from the metrics of vipctl's sidecars and allocator (docs/monitoring.md).",
		Tags:          []string{"vipctl"},
		Editable:      true,
		SchemaVersion: 39,
		Time:          TimeRange{From: "now-6h", To: "now"},
		Refresh:       scrapeInterval,
		Templating:    Templating{List: []Variable{}},
	}
	var ds *DatasourceRef
	if flavor == GrafanaFlavor {
		d.Templating.List = append(d.Templating.List, Variable{Name: "datasource", Label: "Data source", Type: "datasource", Query: "prometheus"})
		ds = &DatasourceRef{Type: "prometheus", UID: "${datasource}"}
	}
	id, x, y, lineHeight := 0, 0, 0, 0
	for _, s := range dashboardSections() {
		id++
		// A new line for the row.
		y += lineHeight
		x, lineHeight = 0, 0
		row := Panel{ID: id, Type: "row", Title: s.title}
		if flavor == ConsoleFlavor {
			row.ShowTitle = true
		} else {
			row.GridPos = &GridPos{H: rowHeight, W: DashboardColumns, X: 0, Y: y}
			row.Collapsed = new(bool)
			y += rowHeight
		}
		d.Panels = append(d.Panels, row)
		for _, c := range s.charts {
			id++
			p := Panel{ID: id, Title: c.title, Description: c.description, Datasource: ds}
			for i, t := range c.queries {
				t.RefID = string(rune('A' + i))
				p.Targets = append(p.Targets, t)
			}
			if flavor == ConsoleFlavor {
				consolePanel(&p, c)
			} else {
				w, h := c.width*DashboardColumns/12, seriesHeight
				if c.kind == stat {
					h = statHeight
				}
				if x+w > DashboardColumns {
					x, y, lineHeight = 0, y+lineHeight, 0
				}
				p.GridPos = &GridPos{H: h, W: w, X: x, Y: y}
				x += w
				lineHeight = max(lineHeight, h)
				grafanaPanel(&p, c)
			}
			d.Panels = append(d.Panels, p)
		}
	}
	return d
}

// thresholds colour a stat green, and red from badFrom up.
func (c chart) thresholds() []Threshold {
	if c.badFrom == 0 {
		return nil
	}
	return []Threshold{{Color: "green"}, {Color: "red", Value: &c.badFrom}}
}

func consolePanel(p *Panel, c chart) {
	p.Span = c.width
	switch c.kind {
	case stat:
		p.Type = "singlestat"
		p.Format = c.unit
		if th := c.thresholds(); th != nil {
			p.Options = &PanelOptions{FieldOptions: &FieldOptions{Thresholds: th}}
		}
	case timeSeries:
		p.Type = "graph"
		p.Yaxes = []Axis{{Format: c.unit, Show: true}, {Format: "short", Show: false}}
		p.Legend = &Show{Show: true}
		p.Stack = c.stack
	}
}

func grafanaPanel(p *Panel, c chart) {
	p.FieldConfig = &FieldConfig{Defaults: FieldDefaults{Unit: c.unit}, Overrides: []struct{}{}}
	switch c.kind {
	case stat:
		p.Type = "stat"
		if th := c.thresholds(); th != nil {
			p.FieldConfig.Defaults.Thresholds = &Thresholds{Mode: "absolute", Steps: th}
		}
		p.Options = &PanelOptions{ReduceOptions: &Reduce{Calcs: []string{"lastNotNull"}, Values: false}, ColorMode: "value", GraphMode: "area"}
	case timeSeries:
		p.Type = "timeseries"
		custom := &FieldCustoms{FillOpacity: 10}
		if c.stack {
			custom.Stacking = &Stacking{Mode: "normal", Group: "A"}
			custom.FillOpacity = 60
		}
		p.FieldConfig.Defaults.Custom = custom
		p.FieldConfig.Defaults.Min = new(float64)
		p.Options = &PanelOptions{
			Legend:  &GrafanaLegend{ShowLegend: true, DisplayMode: "list", Placement: "bottom"},
			Tooltip: &Tooltip{Mode: "multi"},
		}
	}
}

// DashboardJSON is the dashboard for flavor as it is shipped: indented,
// so that a diff of two versions reads. Its types hold strings, ints,
// bools and constant numbers only, which always marshal: a failure is a
// bug TestDashboardQueries meets first.
func DashboardJSON(flavor DashboardFlavor) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	// PromQL's > and < as they are written, not \u003e.
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(NewDashboard(flavor)); err != nil {
		panic("marshalling the dashboard: " + err.Error())
	}
	return buf.Bytes()
}

// DashboardConfigMap ships the console's flavor of the dashboard. The
// console takes the first data value for the dashboard, so there is one.
func DashboardConfigMap() *corev1.ConfigMap {
	m := meta(DashboardName, "monitoring")
	m.Namespace = ConsoleDashboardNamespace
	m.Labels[ConsoleDashboardLabel] = "true"
	return &corev1.ConfigMap{TypeMeta: tm("v1", "ConfigMap"), ObjectMeta: m,
		Data: map[string]string{DashboardKey: string(DashboardJSON(ConsoleFlavor))}}
}
