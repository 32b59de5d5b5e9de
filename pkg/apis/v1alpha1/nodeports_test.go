package v1alpha1

import "testing"

// withAPI adds lines (indented for spec.api) after the API VIPs.
func withAPI(lines string) func(string) string {
	return replace("    vips: [198.51.100.5]\n", "    vips: [198.51.100.5]\n"+lines)
}

// withMonitoring appends a spec.monitoring section.
func withMonitoring(body string) func(string) string {
	return func(s string) string { return s + "  monitoring:\n" + body }
}

// TestNodePortsRefused: no port vipctl listens on may be one the nodes
// already bind (issue 47, class 1): the daemon would fail to bind it on
// every node once the MachineConfig rolls out. Each port is refused at its
// own path, naming who binds it and where, and vipctl's own listeners
// may not share one either.
func TestNodePortsRefused(t *testing.T) {
	t.Parallel()
	runParseErrors(t, base, exact([]parseErrorCase{
		{
			name: "haproxy on the machine config server's ports",
			edit: withAPI("    internalPort: 22623\n    loadBalancerPort: 22623\n    internalLoadBalancerPort: 22624\n"),
			want: []string{
				`spec.api.internalLoadBalancerPort: Invalid value: 22624: the machine config server serves Ignition over plain HTTP on 22624 on control-plane nodes`,
				`spec.api.loadBalancerPort: Duplicate value: "22623 (also spec.api.internalPort)"`,
			},
		},
		{
			name: "haproxy's health port on the kubelet's, etcd's and a NodePort",
			edit: withAPI("    healthPort: 10250\n    loadBalancerPort: 2380\n    internalPort: 22623\n    internalLoadBalancerPort: 30080\n"),
			want: []string{
				`spec.api.internalLoadBalancerPort: Invalid value: 30080: kube-proxy or OVN-Kubernetes serves Services of type NodePort (the default --service-node-port-range) on 30000-32767 on every node`,
				`spec.api.loadBalancerPort: Invalid value: 2380: etcd serves its clients and peers on 2379-2380 on control-plane nodes`,
				`spec.api.healthPort: Invalid value: 10250: the kubelet serves its API on 10250 on every node`,
			},
		},
		{
			name: "monitoring.port on the kubelet's and node-exporter's ports",
			edit: withMonitoring("    port: 9100\n"),
			want: []string{`spec.monitoring.port: Invalid value: 9100: node-exporter serves metrics on 9100 on every node`},
		},
		{
			name: "monitoring.port on the machine config server's plain-HTTP port",
			edit: withMonitoring("    port: 22624\n"),
			want: []string{`spec.monitoring.port: Invalid value: 22624: the machine config server serves Ignition over plain HTTP on 22624 on control-plane nodes`},
		},
		{
			name: "monitoring.port on haproxy's own listener",
			edit: withMonitoring("    port: 9445\n"),
			want: []string{`spec.monitoring.port: Invalid value: 9445: spec.api.loadBalancerPort is 9445 too; the sidecar serves /metrics on every address of every node`},
		},
		{
			name: "an ingress healthPort on the sidecar's probes tracks the wrong daemon",
			edit: replace("      vips: [198.51.100.6]\n", "      vips: [198.51.100.6]\n      healthPort: 9447\n"),
			want: []string{`spec.ingress[0].healthPort: Invalid value: 9447: vipctl's sidecar serves its health probes on 127.0.0.1 on 9447 on every node`},
		},
		{
			name: "an ingress healthPort on haproxy's listener",
			edit: replace("      vips: [198.51.100.6]\n", "      vips: [198.51.100.6]\n      healthPort: 9445\n"),
			want: []string{`spec.ingress[0].healthPort: Invalid value: 9445: spec.api.loadBalancerPort is 9445 too: keepalived would track haproxy, not the router`},
		},
		{
			name: "an ingress healthPort on the kubelet's port",
			edit: replace("      vips: [198.51.100.6]\n", "      vips: [198.51.100.6]\n      healthPort: 10250\n"),
			want: []string{`spec.ingress[0].healthPort: Invalid value: 10250: the kubelet serves its API on 10250 on every node`},
		},
		{
			name: "bgpd's port with spec.bgp",
			edit: func(string) string { return withMonitoring("    port: 179\n")(bgpBase) },
			want: []string{`spec.monitoring.port: Invalid value: 179: vipctl's FRR (bgpd) speaks BGP on 179 on nodes with bgp pools`},
		},
	}))
	runParseErrors(t, poolsOnlyBase, exact([]parseErrorCase{
		{
			name: "pools only: monitoring.port on kube-apiserver's port",
			edit: withMonitoring("    port: 6443\n"),
			want: []string{`spec.monitoring.port: Invalid value: 6443: kube-apiserver serves the API on 6443 on control-plane nodes`},
		},
		{
			name: "pools only: monitoring.port on OpenShift's own haproxy",
			edit: withMonitoring("    port: 9445\n"),
			want: []string{`spec.monitoring.port: Invalid value: 9445: OpenShift's on-prem haproxy balances the API on 9445 on control-plane nodes`},
		},
		{
			name: "pools only: monitoring.port on OpenShift's CoreDNS",
			edit: withMonitoring("    port: 53\n"),
			want: []string{`spec.monitoring.port: Invalid value: 53: OpenShift's on-prem CoreDNS serves the nodes' DNS on 53 on every node`},
		},
	}))
}

// TestNodePortsAllowed: what the table does not rule out stays allowed:
// the router's own ports for an ingress healthPort, the API's own ports
// as what haproxy forwards to, OpenShift's on-prem haproxy ports where it
// does not run, and 179 without BGP.
func TestNodePortsAllowed(t *testing.T) {
	t.Parallel()
	for name, edit := range map[string]func(string) string{
		"ingress healthPort on the router's 80": replace("      vips: [198.51.100.6]\n", "      vips: [198.51.100.6]\n      healthPort: 80\n"),
		"haproxy on 9500 and 9501, metrics 9502": func(s string) string {
			return withMonitoring("    port: 9502\n")(withAPI("    loadBalancerPort: 9500\n    healthPort: 9501\n")(s))
		},
		"metrics on 179 without spec.bgp": withMonitoring("    port: 179\n"),
		"metrics on 9444 beside vipctl's haproxy moved away": func(s string) string {
			return withMonitoring("    port: 9444\n")(withAPI("    healthPort: 9501\n")(s))
		},
	} {
		if _, err := Parse([]byte(edit(base))); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestNodePortsTable: the table is in port order without overlaps, so
// that the reference reads in order and no port has two owners.
func TestNodePortsTable(t *testing.T) {
	t.Parallel()
	var last int32
	for _, n := range NodePorts() {
		if n.First <= last {
			t.Errorf("%s after %d: out of order or overlapping", n.Ports(), last)
		}
		if n.Use == "" || n.Nodes == "" {
			t.Errorf("%s: who binds it and where must be said", n.Ports())
		}
		last = max(n.First, n.Last)
	}
}
