// Package bundle assembles everything `vipctl render` writes: the
// MachineConfigs for each role and, when the nodes are known, every node's
// own files, exactly as the sidecar would write them there.
package bundle

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/dnsrecords"
	"github.com/vipctl/vipctl/pkg/machineconfig"
	"github.com/vipctl/vipctl/pkg/manifests"
	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/pkg/openshiftrelease"
	"github.com/vipctl/vipctl/pkg/render"
	"github.com/vipctl/vipctl/pkg/vrid"
)

// ControlPlaneRole is the role (MachineConfigPool) of the control-plane
// nodes: they hold the API VIP and run haproxy.
const ControlPlaneRole = "master"

// Roles that get a MachineConfig. Workers run keepalived too: ingress and
// service-pool VIPs live there.
var Roles = []string{ControlPlaneRole, "worker"}

// MachineConfigName is the object name for a role; the 50- prefix orders it
// after the MCO's own 00-/01- configs and before users' 99- overrides.
func MachineConfigName(role string) string { return "50-vipctl-" + role }

// ManifestsPath holds the cluster objects (namespace, ConfigMap, allocator,
// RBAC) in apply order, one YAML stream: `oc apply -f out/manifests/`.
const ManifestsPath = "manifests/vipctl.yaml"

// MonitoringPath holds what the cluster's Prometheus needs to scrape
// vipctl and alert on it (manifests.Monitoring), apart from
// ManifestsPath: its ServiceMonitors and PrometheusRule are kinds only a
// cluster with prometheus-operator knows. Not written for
// spec.monitoring.stack none.
const MonitoringPath = "manifests/monitoring.yaml"

// The ClusterVIPs API (docs/api.md): its CustomResourceDefinition, and
// the cluster's object as the live config, for a cluster that starts on
// the object (docs/install.md). Not under manifests/: a kind the
// apiserver serves only once the CRD is established fails in the same
// `oc apply` that creates the CRD; the installer's bootstrap creates
// its manifests again until every one is created, so on day 1 both go
// into its openshift/ directory.
const (
	ClusterVIPsCRDPath    = "clustervips/crd.yaml"
	ClusterVIPsObjectPath = "clustervips/clustervips.yaml"
)

// GrafanaDashboardPath holds vipctl's dashboard as Grafana JSON, to
// import into a Grafana (manifests.GrafanaFlavor; the console's flavor is
// in MonitoringPath). Not under manifests/: `oc apply -f DIR/manifests/`
// reads every .json there as an object.
const GrafanaDashboardPath = "dashboards/vipctl-grafana.json"

// The DNS records the cluster's VIPs need, in each form someone creates
// them from (docs/dns.md).
const (
	// DNSZonePath is an RFC 1035 zone snippet.
	DNSZonePath = "dns/records.zone"
	// DNSJSONPath and DNSCSVPath are the same records for tools and
	// tickets.
	DNSJSONPath = "dns/records.json"
	DNSCSVPath  = "dns/records.csv"
	// DNSEndpointPath is external-dns's DNSEndpoint object.
	DNSEndpointPath = "dns/dnsendpoint.yaml"
)

// Options are the optional inputs of Build.
type Options struct {
	// Nodes, when set, adds DIR/nodes/<name>/....
	Nodes []cluster.Node
	// BootstrapNodes are Node objects (the --nodes file's, or the live
	// cluster's). Their control-plane nodes, with only what rendering
	// reads (cluster.BootstrapNodeList), ship in the control-plane
	// MachineConfig, so `runtimecfg --once` can bring the API VIP up with
	// its peers before the API answers. Each must be one rendering
	// accepts (cluster.SlimNodes leaves out the others).
	BootstrapNodes []corev1.Node
	// State previews live state (allocated pool addresses, router
	// placement); its Nodes are replaced by Nodes.
	State cluster.State
}

// RoleFiles are the files the MachineConfig of role lays on a node: the
// cluster file, the bootstrap node list (when o has one), the check
// scripts, the kernel settings and the static pods.
func RoleFiles(c *v1alpha1.ClusterVIPs, role string, o Options) ([]onnode.File, error) {
	clusterYAML, err := c.ShippedYAML()
	if err != nil {
		return nil, err
	}
	bootstrap, err := bootstrapNodeList(o.BootstrapNodes)
	if err != nil {
		return nil, err
	}
	return roleFiles(c, clusterYAML, role, bootstrap)
}

func roleFiles(c *v1alpha1.ClusterVIPs, clusterYAML []byte, role string, bootstrap []byte) ([]onnode.File, error) {
	files := []onnode.File{{Path: onnode.ClusterConfigPath, Mode: 0o644, Data: clusterYAML}}
	if role == ControlPlaneRole && bootstrap != nil {
		files = append(files, onnode.File{Path: onnode.BootstrapNodesPath, Mode: 0o644, Data: bootstrap})
	}
	scripts := render.ScriptFiles()
	files = append(files, scripts...)
	files = append(files, render.SysctlFiles(c)...)
	pods, err := manifests.StaticPodFiles(c, role)
	if err != nil {
		return nil, err
	}
	return append(files, pods...), nil
}

// File is one output file, relative to the output directory.
type File struct {
	Path string
	Mode fs.FileMode
	Data []byte
}

// Build renders the whole output in memory; nothing touches the disk, so a
// failure leaves no half-written directory.
func Build(c *v1alpha1.ClusterVIPs, o Options) ([]File, error) {
	if errs := v1alpha1.ValidateNodes(c, cluster.Addresses(o.Nodes)); len(errs) > 0 {
		return nil, &v1alpha1.ValidationError{Errors: errs}
	}
	ids, err := vrid.ForCluster(c)
	if err != nil {
		return nil, err
	}
	clusterYAML, err := c.ShippedYAML()
	if err != nil {
		return nil, err
	}
	target, err := openshiftrelease.Parse(c.Spec.OpenShiftRelease)
	if err != nil {
		return nil, fmt.Errorf("spec.openshiftRelease: %w", err)
	}
	bootstrap, err := bootstrapNodeList(o.BootstrapNodes)
	if err != nil {
		return nil, err
	}
	var out []File
	for _, role := range Roles {
		files, err := roleFiles(c, clusterYAML, role, bootstrap)
		if err != nil {
			return nil, err
		}
		mc, err := machineconfig.Build(MachineConfigName(role), role, target, files)
		if err != nil {
			return nil, fmt.Errorf("MachineConfig for %s: %w", role, err)
		}
		if err := machineconfig.Validate(mc, target); err != nil {
			return nil, fmt.Errorf("MachineConfig for %s: %w", role, err)
		}
		data, err := machineconfig.Marshal(mc)
		if err != nil {
			return nil, err
		}
		out = append(out, File{Path: path.Join("machineconfigs", MachineConfigName(role)+".yaml"), Mode: 0o644, Data: data})
	}
	policy, err := disruptionFiles(target)
	if err != nil {
		return nil, err
	}
	out = append(out, policy...)
	objs, err := manifests.Objects(c)
	if err != nil {
		return nil, err
	}
	data, err := manifests.Marshal(objs)
	if err != nil {
		return nil, err
	}
	out = append(out, File{Path: ManifestsPath, Mode: 0o644, Data: data})
	if mon := manifests.Monitoring(c); len(mon) > 0 {
		data, err := manifests.Marshal(mon)
		if err != nil {
			return nil, err
		}
		out = append(out, File{Path: MonitoringPath, Mode: 0o644, Data: data})
	}
	api, err := clusterVIPsFiles(c)
	if err != nil {
		return nil, err
	}
	out = append(out, api...)
	// Whatever the stack: a Grafana fed by a Prometheus vipctl does not
	// configure (stack none) reads the same series.
	out = append(out, File{Path: GrafanaDashboardPath, Mode: 0o644, Data: manifests.DashboardJSON(manifests.GrafanaFlavor)})
	dnsOut, err := dnsFiles(c)
	if err != nil {
		return nil, err
	}
	out = append(out, dnsOut...)
	if len(o.Nodes) == 0 {
		return out, nil
	}
	st := o.State
	st.Nodes = o.Nodes
	plan, err := NodePlan(c, ids, st)
	if err != nil {
		return nil, err
	}
	for _, n := range o.Nodes {
		files, err := plan.NodeFiles(n.Name)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			// Node paths, not the pods': frr.conf lies in vipctl's own
			// directory on the node.
			out = append(out, File{Path: path.Join("nodes", n.Name, onnode.NodePath(f.Path)), Mode: f.Mode, Data: f.Data})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// NodePlan is the plan for a known node list, refused, as `render` and
// `validate` with --nodes refuse it, when some VIPs could be held by no
// node or a node a pool or IngressController selects lacks the interface
// its VIPs live on. A sidecar instead reports these and renders the rest.
func NodePlan(c *v1alpha1.ClusterVIPs, ids map[v1alpha1.InstanceKey]uint8, st cluster.State) (*render.Plan, error) {
	plan, err := render.NewPlan(cluster.Compile(c), ids, st)
	if err != nil {
		return nil, err
	}
	refused := plan.Unplaced()
	for _, m := range plan.MissingInterfaces() {
		refused = append(refused, m.String())
	}
	if len(refused) > 0 {
		return nil, fmt.Errorf("--nodes: %s", strings.Join(refused, "; "))
	}
	return plan, nil
}

// clusterVIPsFiles are the ClusterVIPs CRD and c's object as the live
// config.
func clusterVIPsFiles(c *v1alpha1.ClusterVIPs) ([]File, error) {
	obj, err := manifests.SourceObject(c)
	if err != nil {
		return nil, err
	}
	data, err := yaml.Marshal(obj.Object)
	if err != nil {
		return nil, err
	}
	return []File{
		{Path: ClusterVIPsCRDPath, Mode: 0o644, Data: manifests.ClusterVIPsCRD()},
		{Path: ClusterVIPsObjectPath, Mode: 0o644, Data: data},
	}, nil
}

// dnsFiles are the DNS records of c's VIPs in every form; none where
// vipctl has no records to give (dnsrecords.Applies).
func dnsFiles(c *v1alpha1.ClusterVIPs) ([]File, error) {
	if dnsrecords.Applies(c) != nil {
		return nil, nil
	}
	records := dnsrecords.For(cluster.Compile(c))
	asJSON, err := dnsrecords.JSON(records)
	if err != nil {
		return nil, err
	}
	asCSV, err := dnsrecords.CSV(records)
	if err != nil {
		return nil, err
	}
	endpoint, err := dnsrecords.ExternalDNS(c, records)
	if err != nil {
		return nil, err
	}
	return []File{
		{Path: DNSZonePath, Mode: 0o644, Data: dnsrecords.Zone(c, records)},
		{Path: DNSJSONPath, Mode: 0o644, Data: asJSON},
		{Path: DNSCSVPath, Mode: 0o644, Data: asCSV},
		{Path: DNSEndpointPath, Mode: 0o644, Data: endpoint},
	}, nil
}

// bootstrapNodeList is what the control-plane MachineConfig ships as
// onnode.BootstrapNodesPath; nil for none, or when no node is a
// control-plane node.
func bootstrapNodeList(items []corev1.Node) ([]byte, error) {
	data, skipped, err := cluster.BootstrapNodeList(items)
	if err != nil {
		return nil, err
	}
	if len(skipped) > 0 {
		return nil, fmt.Errorf("bootstrap node list: %w", errors.Join(skipped...))
	}
	return data, nil
}
