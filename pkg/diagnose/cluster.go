package diagnose

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/status"
)

// ClusterOptions say what the cluster part gathers.
type ClusterOptions struct {
	Kube kubernetes.Interface
	// Namespace holds the ConfigMap, the allocator and the static pods'
	// mirror pods.
	Namespace string
	// Config is the config given with -f; nil reads the ConfigMap's.
	Config *v1alpha1.ClusterVIPs
	// Nodes limits the node records, the sidecars' Events and the mirror
	// pods' logs to these nodes; empty means every node.
	Nodes []string
	// LogLines is how many of each container's last log lines to keep.
	LogLines int64
	Now      time.Time
}

// NodeRecord is what the API knows of a node that vipctl cares about.
type NodeRecord struct {
	Name string `json:"name"`
	// Annotations are the vipctl.io/ ones: the held VIPs, the BGP
	// sessions, a drain.
	Annotations   map[string]string      `json:"annotations,omitempty"`
	Labels        map[string]string      `json:"labels,omitempty"`
	Addresses     []corev1.NodeAddress   `json:"addresses,omitempty"`
	Unschedulable bool                   `json:"unschedulable,omitempty"`
	Conditions    []corev1.NodeCondition `json:"conditions,omitempty"`
	Held          v1alpha1.HeldVIPs      `json:"heldVIPs"`
	BGPSessions   v1alpha1.BGPSessions   `json:"bgpSessions,omitempty"`
	Taints        []corev1.Taint         `json:"taints,omitempty"`
	// AnnotationErrors are the annotations that do not parse.
	AnnotationErrors []string `json:"annotationErrors,omitempty"`
}

// Event is one Event vipctl recorded.
type Event struct {
	LastSeen time.Time `json:"lastSeen"`
	Type     string    `json:"type"`
	Reason   string    `json:"reason"`
	Object   string    `json:"object"`
	Source   string    `json:"source"`
	Host     string    `json:"host,omitempty"`
	Count    int32     `json:"count"`
	Message  string    `json:"message"`
}

// Cluster gathers the cluster's part of a bundle. Only a node named in
// o.Nodes that does not exist is an error (the user mistyped it); what
// the API refuses (Events or logs the user may not read, a kubelet that
// does not answer for pods/log) is recorded in the bundle's problems.
func Cluster(ctx context.Context, o ClusterOptions) (*Archive, error) {
	a := newArchive("", o.Now)
	cfg := o.Config
	cm, err := o.Kube.CoreV1().ConfigMaps(o.Namespace).Get(ctx, v1alpha1.ConfigMapName, metav1.GetOptions{})
	switch {
	case err != nil:
		a.fail("config/configmap.yaml", err)
	default:
		cm.ManagedFields = nil
		a.addYAML("config/configmap.yaml", cm)
		live, err := cluster.ParseConfigMap(cm)
		if err != nil {
			a.fail("config/effective.yaml", err)
		} else if cfg == nil {
			cfg = live
		}
	}
	if cfg != nil {
		// Defaults applied: what the sidecars and the allocator act on.
		a.addYAML("config/effective.yaml", cfg)
	}

	nodeList, err := o.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	var nodes []corev1.Node
	if err != nil {
		a.fail("nodes", err)
	} else {
		nodes = nodeList.Items
		if missing := unknownNodes(nodes, o.Nodes); len(missing) > 0 {
			return nil, fmt.Errorf("no node %s in the cluster", strings.Join(missing, ", "))
		}
	}
	selected := func(name string) bool { return len(o.Nodes) == 0 || slices.Contains(o.Nodes, name) }
	for i := range nodes {
		if selected(nodes[i].Name) {
			a.addJSON("nodes/"+nodes[i].Name+"/node.json", nodeRecord(&nodes[i]))
		}
	}

	svcs, err := o.Kube.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	switch {
	case err != nil:
		a.fail("status", fmt.Errorf("listing Services: %w", err))
	case cfg == nil:
		a.fail("status", errors.New("no config: the ConfigMap is missing or invalid and no -f was given"))
	default:
		// Every node, not only those selected: the state of a VIP
		// depends on who else holds it.
		report, errs := status.NewReport(cfg, nodes, svcs.Items)
		if reach, err := status.NodeReach(ctx, o.Kube); err != nil {
			errs = append(errs, err)
		} else {
			report.Classify(reach, o.Now)
		}
		a.addJSON("status/status.json", report)
		var b strings.Builder
		b.WriteString(report.Text(o.Now))
		if d := status.Drained(nodes); len(d) > 0 {
			fmt.Fprintf(&b, "\ndrained: %s\n", strings.Join(d, ", "))
		}
		for _, p := range report.Problems() {
			fmt.Fprintf(&b, "\nproblem: %s\n", p)
		}
		for _, e := range errs {
			fmt.Fprintf(&b, "\nwarning: %s\n", e)
		}
		a.add("status/status.txt", []byte(b.String()))
	}

	gatherEvents(ctx, a, o, selected)
	gatherPods(ctx, a, o, selected)
	return a, nil
}

func unknownNodes(nodes []corev1.Node, names []string) []string {
	var missing []string
	for _, n := range names {
		if !slices.ContainsFunc(nodes, func(node corev1.Node) bool { return node.Name == n }) {
			missing = append(missing, n)
		}
	}
	return missing
}

// vipctlAnnotations is the prefix of the annotations vipctl owns: its API
// group.
var vipctlAnnotations = strings.SplitN(v1alpha1.APIVersion, "/", 2)[0] + "/"

func nodeRecord(n *corev1.Node) NodeRecord {
	r := NodeRecord{Name: n.Name, Labels: n.Labels, Addresses: n.Status.Addresses, Unschedulable: n.Spec.Unschedulable,
		Conditions: n.Status.Conditions, Taints: n.Spec.Taints, Annotations: map[string]string{}}
	for k, v := range n.Annotations {
		if strings.HasPrefix(k, vipctlAnnotations) {
			r.Annotations[k] = v
		}
	}
	var err error
	if r.Held, err = v1alpha1.ParseHeldVIPs(n.Annotations[v1alpha1.AnnotationNodeVIPs]); err != nil {
		r.AnnotationErrors = append(r.AnnotationErrors, err.Error())
	}
	if r.BGPSessions, err = v1alpha1.ParseBGPSessions(n.Annotations[v1alpha1.AnnotationNodeBGPSessions]); err != nil {
		r.AnnotationErrors = append(r.AnnotationErrors, err.Error())
	}
	return r
}

// gatherEvents keeps the Events vipctl's components recorded, which the
// API server keeps for a while (an hour by default, three on OpenShift).
func gatherEvents(ctx context.Context, a *Archive, o ClusterOptions, selected func(string) bool) {
	var events []Event
	for _, source := range v1alpha1.EventSources {
		list, err := o.Kube.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("source", source).String()})
		if err != nil {
			a.fail("events from "+source, err)
			continue
		}
		for _, e := range list.Items {
			if source == v1alpha1.EventSourceSidecar && !selected(e.Source.Host) {
				continue
			}
			events = append(events, event(&e))
		}
	}
	sort.SliceStable(events, func(i, j int) bool { return events[i].LastSeen.Before(events[j].LastSeen) })
	if events == nil {
		events = []Event{}
	}
	a.addJSON("events/events.json", events)
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintln(w, "LAST SEEN\tTYPE\tREASON\tOBJECT\tSOURCE\tCOUNT\tMESSAGE")
	for _, e := range events {
		src := e.Source
		if e.Host != "" {
			src += "/" + e.Host
		}
		_, _ = fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", e.LastSeen.UTC().Format(time.RFC3339), e.Type, e.Reason, e.Object, src, e.Count, e.Message)
	}
	_ = w.Flush()
	a.add("events/events.txt", []byte(b.String()))
}

func event(e *corev1.Event) Event {
	last := e.LastTimestamp.Time
	if last.IsZero() {
		last = e.EventTime.Time
	}
	obj := strings.ToLower(e.InvolvedObject.Kind) + "/"
	if e.InvolvedObject.Namespace != "" {
		obj += e.InvolvedObject.Namespace + "/"
	}
	return Event{LastSeen: last, Type: e.Type, Reason: e.Reason, Object: obj + e.InvolvedObject.Name,
		Source: e.Source.Component, Host: e.Source.Host, Count: max(e.Count, 1), Message: e.Message}
}

// mirrorPodAnnotation marks the API's copy of a static pod (the kubelet
// sets it); vipctl's keepalived and haproxy pods are static.
const mirrorPodAnnotation = "kubernetes.io/config.mirror"

// gatherPods keeps every vipctl pod's object and its containers' last
// log lines (and those of the run before a restart): the static pods'
// mirror pods on the selected nodes and the allocator's pods.
func gatherPods(ctx context.Context, a *Archive, o ClusterOptions, selected func(string) bool) {
	pods, err := o.Kube.CoreV1().Pods(o.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		a.fail("pods", err)
		return
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if _, static := p.Annotations[mirrorPodAnnotation]; static && !selected(p.Spec.NodeName) {
			continue
		}
		dir := "pods/" + p.Name + "/"
		p.ManagedFields = nil
		a.addYAML(dir+"pod.yaml", p)
		restarts := map[string]int32{}
		for _, st := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
			restarts[st.Name] = st.RestartCount
		}
		for _, c := range slices.Concat(p.Spec.InitContainers, p.Spec.Containers) {
			podLog(ctx, a, o, p, c.Name, false, dir+c.Name+".log")
			if restarts[c.Name] > 0 {
				podLog(ctx, a, o, p, c.Name, true, dir+c.Name+".previous.log")
			}
		}
	}
}

// podLog keeps a container's last lines, or, where the API cannot serve
// them (no kubelet answering, no right to pods/log), why not, in place of
// the log and in the problems.
func podLog(ctx context.Context, a *Archive, o ClusterOptions, p *corev1.Pod, container string, previous bool, name string) {
	req := o.Kube.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: container, Previous: previous,
		TailLines: &o.LogLines, Timestamps: true, LimitBytes: ptr.To(int64(maxFile))})
	rc, err := req.Stream(ctx)
	var data []byte
	if err == nil {
		data, err = io.ReadAll(rc)
		_ = rc.Close()
	}
	if err != nil {
		if apierrors.IsForbidden(err) {
			err = fmt.Errorf("%w (reading logs needs get on pods/log in %s)", err, o.Namespace)
		}
		a.fail(name, err)
		a.add(name+".unavailable", []byte(err.Error()+"\n"))
		return
	}
	a.add(name, data)
}
