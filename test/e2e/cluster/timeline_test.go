package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/vipctl/vipctl/test/clusterlab"
)

// watchTimeline logs, with the time and as it changes, what explains a
// hole in a VIP's answers, to be read beside the pollers' failed
// requests and the nodes' logs: who carries each watched address; the
// client's neighbour entry for it (whose MAC the client sends to); the
// workload pods, each with its node, readiness and whether it is
// terminating; each Service's endpoints by node (ready, serving,
// terminating) and the addresses kube-proxy takes it by (its
// load-balancer status with each address's ipMode, its external IPs: an
// address gone from there is not DNATed, and a node holding it answers
// a SYN itself); and what each node's kube-proxy says it delivers of
// each Local Service (its health check node port). The returned func stops it; call it before the scenario
// ends, however it ends.
func watchTimeline(t *testing.T, c *clusterlab.Cluster, ws []watchedAddr) func() {
	ctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	logf := func(format string, args ...any) {
		if ctx.Err() == nil {
			t.Logf("%s "+format, append([]any{time.Now().Format("15:04:05.000")}, args...)...)
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		carriers, neighbours := map[string]string{}, map[string]string{}
		macs := nodeMACs(c)
		for ctx.Err() == nil {
			entries, v := clientNeighbours(c), c.ReadCarriers()
			for _, w := range ws {
				if now := fmt.Sprint(clusterCarriers(v, w.pool, w.addr)); now != carriers[w.addr] {
					logf("%s: carried by %s", w.what, now)
					carriers[w.addr] = now
				}
				if w.pool == clusterlab.PoolBGP {
					continue // the client reaches those through the router
				}
				e := entries[w.addr]
				if _, known := macs[e.MAC]; e.MAC != "" && !known {
					macs = nodeMACs(c) // a node rebooted
				}
				now := e.describe(macs)
				if now != neighbours[w.addr] {
					logf("%s: the client's neighbour entry %s", w.what, now)
					neighbours[w.addr] = now
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		logProxies(ctx, c, logf)
	}()
	f := informers.NewSharedInformerFactoryWithOptions(c.Admin, 0, informers.WithNamespace(clusterlab.WorkloadNS))
	// Each object's description as last logged, by kind and name.
	last := map[string]string{}
	var mu sync.Mutex
	// logObj logs an object of kind named name whose description is now,
	// when that changed.
	logObj := func(key, now, format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if last[key] != now {
			last[key] = now
			logf(format, append(args, now)...)
		}
	}
	logPod := func(obj any, gone bool) {
		if p, ok := obj.(*corev1.Pod); ok {
			logObj("pod/"+p.Name, describeOrGone(describePod(p), gone), "pod %s: %s", p.Name)
		}
	}
	logService := func(obj any, gone bool) {
		if svc, ok := obj.(*corev1.Service); ok {
			logObj("service/"+svc.Name, describeOrGone(describeService(svc), gone), "service %s: %s", svc.Name)
		}
	}
	logSlice := func(obj any, gone bool) {
		if s, ok := obj.(*discoveryv1.EndpointSlice); ok {
			logObj("slice/"+s.Name, describeOrGone(describeSlice(s), gone), "endpoints of %s (%s, %s): %s", s.Labels[discoveryv1.LabelServiceName], s.AddressType, s.Name)
		}
	}
	handler := func(log func(any, bool)) cache.ResourceEventHandlerFuncs {
		return cache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { log(o, false) },
			UpdateFunc: func(_, o any) { log(o, false) },
			DeleteFunc: func(o any) {
				if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
					o = d.Obj
				}
				log(o, true)
			},
		}
	}
	if _, err := f.Core().V1().Pods().Informer().AddEventHandler(handler(logPod)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Discovery().V1().EndpointSlices().Informer().AddEventHandler(handler(logSlice)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Core().V1().Services().Informer().AddEventHandler(handler(logService)); err != nil {
		t.Fatal(err)
	}
	f.Start(ctx.Done())
	return func() {
		stop()
		wg.Wait()
		f.Shutdown()
	}
}

// describeOrGone is what the timeline says of an object: its
// description, or that it was deleted.
func describeOrGone(desc string, gone bool) string {
	if gone {
		return "deleted"
	}
	return desc
}

// describePod is a workload pod's place and state: its node, phase,
// readiness, and when its termination's grace ends.
func describePod(p *corev1.Pod) string {
	ready := false
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			ready = c.Status == corev1.ConditionTrue
		}
	}
	s := fmt.Sprintf("on %q %s ready=%t", p.Spec.NodeName, p.Status.Phase, ready)
	if p.DeletionTimestamp != nil {
		s += " terminating, its grace ends " + p.DeletionTimestamp.Format("15:04:05")
	}
	return s
}

// describeService is what kube-proxy reads of a Service to send traffic
// for its load-balancer and external addresses: the status's ingress
// addresses with their ipMode (Proxy: not DNATed on the nodes), the
// external IPs and the traffic policy.
func describeService(svc *corev1.Service) string {
	var lb []string
	for _, in := range svc.Status.LoadBalancer.Ingress {
		a := in.IP
		if in.IPMode != nil {
			a += "(" + string(*in.IPMode) + ")"
		}
		lb = append(lb, a)
	}
	return fmt.Sprintf("load balancer %v, external IPs %v, policy %s", lb, svc.Spec.ExternalIPs, svc.Spec.ExternalTrafficPolicy)
}

// describeSlice lists an EndpointSlice's endpoints by node and address
// with their conditions: r ready, s serving, t terminating (the address
// names what a stale kube-proxy still sends to).
func describeSlice(s *discoveryv1.EndpointSlice) string {
	var out []string
	for _, e := range s.Endpoints {
		node := "?"
		if e.NodeName != nil {
			node = *e.NodeName
		}
		flag := func(b *bool, c string) string {
			if b != nil && *b {
				return c
			}
			return "-"
		}
		out = append(out, node+" "+strings.Join(e.Addresses, ",")+":"+flag(e.Conditions.Ready, "r")+flag(e.Conditions.Serving, "s")+flag(e.Conditions.Terminating, "t"))
	}
	slices.Sort(out)
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, " ")
}

// neighbour is one entry of the client's neighbour table.
type neighbour struct {
	MAC   string   `json:"lladdr"`
	State []string `json:"state"`
	Dst   string   `json:"dst"`
}

// describe names the node whose interface has the entry's MAC.
func (n neighbour) describe(macs map[string]string) string {
	if n.Dst == "" {
		return "none"
	}
	who := macs[n.MAC]
	if who == "" {
		who = "no node"
	}
	return fmt.Sprintf("%s (%s) %s", n.MAC, who, strings.Join(n.State, ","))
}

// clientNeighbours is the client's neighbour table by address.
func clientNeighbours(c *clusterlab.Cluster) map[string]neighbour {
	out := map[string]neighbour{}
	b, err := c.Client.Exec("ip", "-j", "neigh", "show")
	if err != nil {
		return out
	}
	var list []neighbour
	if json.Unmarshal(b, &list) != nil {
		return out
	}
	for _, n := range list {
		out[n.Dst] = n
	}
	return out
}

// nodeMACs maps the MAC of every running node's VRRP interface to the
// node (a reboot gives a node a new one).
func nodeMACs(c *clusterlab.Cluster) map[string]string {
	out := map[string]string{}
	for _, n := range c.Nodes {
		if !n.Running() {
			continue
		}
		b, err := n.Host.Exec("ip", "-j", "link", "show", "dev", n.Host.Iface)
		if err != nil {
			continue
		}
		var links []struct {
			Address string `json:"address"`
		}
		if json.Unmarshal(b, &links) == nil && len(links) == 1 {
			out[links[0].Address] = n.Name
		}
	}
	return out
}

// logProxies logs, as it changes, how many local endpoints each node's
// kube-proxy counts for each Local Service, from the Service's health
// check node port as a load balancer asks it: a node whose kube-proxy
// has not caught up with the EndpointSlices drops the Service's traffic
// although it runs a ready endpoint.
func logProxies(ctx context.Context, c *clusterlab.Cluster, logf func(string, ...any)) {
	last := map[string]string{}
	client := &http.Client{Timeout: 300 * time.Millisecond, Transport: &http.Transport{DialContext: c.Client.DialContext, DisableKeepAlives: true}}
	for ctx.Err() == nil {
		svcs, err := c.Admin.CoreV1().Services(clusterlab.WorkloadNS).List(ctx, metav1.ListOptions{})
		if err != nil {
			time.Sleep(time.Second)
			continue
		}
		for _, s := range svcs.Items {
			if s.Spec.HealthCheckNodePort == 0 {
				continue
			}
			for _, n := range c.Nodes {
				key := s.Name + "@" + n.Name
				now := "down"
				if n.Running() {
					now = proxyView(ctx, client, n.Spec.IP4, s.Spec.HealthCheckNodePort)
				}
				if now != last[key] {
					logf("kube-proxy on %s: %s %s", n.Name, s.Name, now)
					last[key] = now
				}
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// proxyView is what kube-proxy's health check for a Local Service
// answers on node: its local endpoints, or why it did not answer.
func proxyView(ctx context.Context, client *http.Client, node string, port int32) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(node, strconv.Itoa(int(port)))+"/healthz", nil)
	if err != nil {
		return err.Error()
	}
	resp, err := client.Do(req)
	if err != nil {
		return "no answer"
	}
	defer func() { _ = resp.Body.Close() }()
	var body struct {
		LocalEndpoints int `json:"localEndpoints"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return fmt.Sprintf("localEndpoints=%d (%d)", body.LocalEndpoints, resp.StatusCode)
}

// arrival is when a node first carried an address and when its
// kube-proxy first counted a local endpoint of the address's Service.
type arrival struct {
	what           string
	proxy, carried time.Time
}

// watchArrival watches, every 100 ms until the returned func is called,
// when node first carries each watched address (a Service's, named in
// its what) and when node's kube-proxy first counts a local endpoint of
// that Service; the func returns what it saw, one per address.
func watchArrival(t *testing.T, c *clusterlab.Cluster, ws []watchedAddr, node string) func() []arrival {
	ctx, stop := context.WithCancel(t.Context())
	out := make([]arrival, len(ws))
	ports := make([]int32, len(ws))
	for i, w := range ws {
		out[i].what = w.what
		name, _, _ := strings.Cut(w.what, " ")
		svc, err := c.Admin.CoreV1().Services(clusterlab.WorkloadNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = svc.Spec.HealthCheckNodePort
	}
	client := &http.Client{Timeout: 300 * time.Millisecond, Transport: &http.Transport{DialContext: c.Client.DialContext, DisableKeepAlives: true}}
	ip := c.Node(node).Spec.IP4
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			for i := range ws {
				if out[i].proxy.IsZero() && strings.HasPrefix(proxyView(ctx, client, ip, ports[i]), "localEndpoints=1") {
					out[i].proxy = time.Now()
				}
			}
			// One reading for every address, after the views.
			v, read := c.ReadCarriers(), time.Now()
			for i, w := range ws {
				if out[i].carried.IsZero() && slices.Contains(clusterCarriers(v, w.pool, w.addr), node) {
					out[i].carried = read
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	return func() []arrival {
		stop()
		<-done
		return out
	}
}
