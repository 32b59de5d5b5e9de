package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/vipctl/vipctl/test/fixture"
	"github.com/vipctl/vipctl/test/lab"
	"github.com/vipctl/vipctl/test/netlab"
)

// metallbMode is how MetalLB announces in a trial.
type metallbMode string

const (
	// metallbL2: L2 mode, ARP from the elected speaker.
	metallbL2 metallbMode = "l2"
	// metallbNative: BGP from the speaker's own BGP implementation
	// (metallb-native.yaml).
	metallbNative metallbMode = "native"
	// metallbFRR: BGP through FRR beside each speaker (metallb-frr.yaml).
	metallbFRR metallbMode = "frr"
	// metallbFRRBFD: metallbFRR with a BFDProfile on the BGPPeer.
	metallbFRRBFD metallbMode = "frr-bfd"
	// metallbL2Fast: metallbL2 with memberlist's timers shortened
	// (metallbFastMemberlist) through the configuration file v0.16 reads
	// from its optional ConfigMap.
	metallbL2Fast metallbMode = "l2-fast"
)

// bgp tells whether the mode announces over BGP.
func (m metallbMode) bgp() bool { return m != metallbL2 && m != metallbL2Fast }

// memberlistTimers are the memberlist settings a speaker reads from
// /etc/metallb/memberlist/config.json (v0.16.0+, the optional
// metallb-memberlist-config ConfigMap): memberlist's LAN defaults, which
// the speaker uses without the file, but for the failure detector's
// timers. Every field of the file is required.
type memberlistTimers struct {
	probeInterval, probeTimeout time.Duration
	suspicionMult               int
}

// metallbFastMemberlist is the quickest failure detection that stays
// sane on a LAN: a probe every 200 ms (default 1 s), answered within
// 100 ms (500 ms), and a suspect declared dead after 2 probe intervals
// (4) scaled by log10 of the node count, which is 1 for three nodes:
// about 400 ms of suspicion after a failed probe.
var metallbFastMemberlist = memberlistTimers{probeInterval: 200 * time.Millisecond, probeTimeout: 100 * time.Millisecond, suspicionMult: 2}

func (m memberlistTimers) settings() string {
	return fmt.Sprintf("tuned/l2/memberlist/probe=%s/timeout=%s/suspicion=%d", m.probeInterval, m.probeTimeout, m.suspicionMult)
}

// file is the configuration file's text.
func (m memberlistTimers) file() []byte {
	b, _ := json.Marshal(map[string]any{
		"TCPTimeout": "10s", "IndirectChecks": 3, "RetransmitMult": 4, "SuspicionMult": m.suspicionMult,
		"SuspicionMaxTimeoutMult": 6, "PushPullInterval": "30s", "ProbeTimeout": m.probeTimeout.String(),
		"ProbeInterval": m.probeInterval.String(), "DisableTcpPings": false, "AwarenessMaxMultiplier": 8,
		"GossipNodes": 3, "GossipInterval": "200ms", "GossipToTheDeadTime": "30s", "GossipVerifyIncoming": true,
		"GossipVerifyOutgoing": true, "EnableCompression": true, "HandoffQueueDepth": 1024, "UDPBufferSize": 1400,
		"QueueCheckInterval": "30s",
	})
	return b
}

// memberlistConfigDir is where a speaker pod mounts the optional
// metallb-memberlist-config ConfigMap (MetalLB's speaker reads
// config.json there, a path it does not let one change).
const memberlistConfigDir = "/etc/metallb/memberlist"

// metallbNS is the namespace MetalLB's manifests install it in.
const metallbNS = "metallb-system"

// metallbControllerPod is the controller's pod, named as its Deployment
// would name one; the controller is told it (METALLB_POD_NAME, as the
// release manifest sets it from the pod's name).
const metallbControllerPod = "controller-0"

// metallbSpeakerLabels are the labels of the speaker pods in MetalLB's
// manifests; the speakers find each other's memberlist by them.
const metallbSpeakerLabels = "app=metallb,component=speaker"

// metallbTrial runs MetalLB in L2 mode for one LoadBalancer Service on
// the peers' three nodes, as its release manifests (metallb-native.yaml)
// configure it: the controller (which assigns the Service its address
// from an IPAddressPool and creates the memberlist secret) and a speaker
// per node with memberlist, its fast dead-node detection, keyed by that
// secret. They run as processes: the controller on the API's host, each
// speaker in its node's namespace with the pod environment the manifest
// gives it, its pod object in the API with the node's address, as the
// speakers list their peers' pods to join them. MetalLB only answers ARP
// for the address; kube-proxy is what takes the traffic on the node: an
// nftables DNAT of the address to the node's own echo server stands in
// for it. The Service's EndpointSlice names a ready endpoint on every node
// (externalTrafficPolicy Cluster). It injects the fault into the node
// MetalLB elected and returns the outage and the failed requests.
//
// In BGP modes every speaker peers with the lab's upstream router and
// announces the address; the fault is node-loss alone, measured by the
// client behind the router (peerLab.bgpNodeLoss). The BGP modes: MetalLB's
// own BGP speaker (native), or its FRR mode, with BFD (MetalLB's
// quickest detection, 300 ms × 3 as vipctl's) or without.
func metallbTrial(b *testing.B, controller, speaker string, mode metallbMode, scenario string, i int) (time.Duration, int) {
	var outage time.Duration
	var failed int
	b.Run(fmt.Sprintf("trial-%d", i), func(t *testing.B) {
		bgp := mode.bgp()
		pl := startPeerLab(t, bgp, mode == metallbFRRBFD)
		vip := peerServiceVIP
		if bgp {
			vip = peerBGPVIP
		}
		ctx := context.Background()
		agents := pl.startMetalLB(t, controller, speaker, mode, vip+"/32")
		pl.cycle = time.Second // memberlist's LAN probe interval
		if mode == metallbL2Fast {
			pl.cycle = metallbFastMemberlist.probeInterval
		}
		pl.echoService(t, nil)
		lab.WaitFor(t, 60*time.Second, "the Service's address from MetalLB", func() bool {
			s, err := pl.admin.CoreV1().Services(metav1.NamespaceDefault).Get(ctx, "echo", metav1.GetOptions{})
			return err == nil && len(s.Status.LoadBalancer.Ingress) == 1 && s.Status.LoadBalancer.Ingress[0].IP == vip
		})
		if bgp {
			outage, failed = pl.bgpNodeLoss(t)
			return
		}
		holder := metallbHolder(t, pl)
		outage, failed = pl.measure(t, "http://"+vip+":8080/", holder, scenario, agents[holder], func() {
			// MetalLB's way to take a node out of announcing.
			patch := `{"metadata":{"labels":{"node.kubernetes.io/exclude-from-external-load-balancers":""}}}`
			if _, err := pl.admin.CoreV1().Nodes().Patch(ctx, holder, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
		})
	})
	return outage, failed
}

// startMetalLB installs MetalLB's CRDs and the objects of its release
// manifest and of a user's configuration (metallbObjects: an
// IPAddressPool holding pool, CIDR, advertised as mode says), starts the
// controller on the API's host and a speaker on every node (in FRR
// modes with FRR and MetalLB's reloader beside it, metallbFRRNode) with
// a DNAT of pool to the node's echo server (kube-proxy's part), and
// returns the processes, the controller's under "controller".
func (pl *peerLab) startMetalLB(t testing.TB, controller, speaker string, mode metallbMode, pool string) map[string]*netlab.Proc {
	t.Helper()
	ctx := context.Background()
	crds, err := filepath.Glob(fixture.Repo("bin/metallb-crds/*.yaml"))
	if err != nil || len(crds) == 0 {
		t.Fatalf("MetalLB's CRDs not in bin/metallb-crds: run hack/build-peers.sh (%v)", err)
	}
	pl.api.InstallCRDs(t, crds...)
	metallbObjects(t, pl, mode, pool)

	env := []string{"env", "KUBECONFIG=" + pl.kubeconfig, "HOME=" + pl.home}
	frrMode := mode == metallbFRR || mode == metallbFRRBFD
	if frrMode {
		// metallb-frr.yaml's controller and speakers.
		env = append(env, "METALLB_BGP_TYPE=frr")
	}
	agents := map[string]*netlab.Proc{}
	agents["controller"] = pl.gw.Start("metallb-controller", append(env,
		"METALLB_NAMESPACE="+metallbNS, "METALLB_POD_NAME="+metallbControllerPod, "METALLB_ML_SECRET_NAME=memberlist", "METALLB_DEPLOYMENT=controller",
		controller, "--port=7472", "--log-level=info", "--webhook-mode=disabled", "--disable-cert-rotation")...)
	logOnFailure(t, "MetalLB", agents)

	// The memberlist secret the controller creates, where the
	// speakers' pods mount it.
	keyDir := filepath.Join(pl.home, "ml_secret_key")
	lab.WaitFor(t, 60*time.Second, "the memberlist secret", func() bool {
		s, err := pl.admin.CoreV1().Secrets(metallbNS).Get(ctx, "memberlist", metav1.GetOptions{})
		if err != nil {
			return false
		}
		if err := os.MkdirAll(keyDir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(keyDir, "secretkey"), s.Data["secretkey"], 0o600); err != nil {
			t.Fatal(err)
		}
		return true
	})
	for n, name := range pl.names {
		ip := pl.nodeIP(n)
		h := pl.hosts[name]
		// kube-proxy's part: the Services' addresses taken in on the
		// node and handed to its local endpoint.
		family, to := "ip", ip+":8080"
		if strings.Contains(pool, ":") {
			family, to = "ip6", "["+pl.nodeIP6(n)+"]:8080"
		}
		h.MustExec("nft", "add table "+family+" lb; add chain "+family+" lb pre { type nat hook prerouting priority -100; }; "+
			"add rule "+family+" lb pre "+family+" daddr "+pool+" tcp dport 8080 dnat to "+to)
		nodeEnv := env
		if frrMode {
			reloader := pl.metallbFRRNode(t, h, agents)
			nodeEnv = append(slices.Clone(env), "FRR_CONFIG_FILE="+filepath.Join(reloader, "frr.conf"),
				"FRR_RELOADER_PID_FILE="+filepath.Join(reloader, "reloader.pid"))
		}
		argv := append(slices.Clone(nodeEnv),
			"METALLB_NODE_NAME="+name, "METALLB_POD_NAME=speaker-"+name, "METALLB_HOST="+ip,
			"METALLB_ML_BIND_ADDR="+ip, "METALLB_ML_LABELS="+metallbSpeakerLabels, "METALLB_ML_BIND_PORT=7946",
			"METALLB_ML_SECRET_KEY_PATH="+keyDir, "METALLB_NAMESPACE="+metallbNS,
			speaker, "--port=7472", "--log-level=info")
		if mode == metallbL2Fast {
			argv = withMemberlistConfig(t, pl.home, metallbFastMemberlist, argv)
		}
		agents[name] = h.Start("metallb-speaker", argv...)
	}
	return agents
}

// withMemberlistConfig runs argv with m's configuration file at the path
// the speaker reads it from, as the ConfigMap's volume puts it there: a
// directory of the trial's bound over memberlistConfigDir in the
// speaker's own mount namespace. The host needs the directory to bind
// over; it is made, and removed after the trial, when missing.
func withMemberlistConfig(t testing.TB, home string, m memberlistTimers, argv []string) []string {
	t.Helper()
	dir := filepath.Join(home, "memberlist-config")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), m.file(), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Dir(memberlistConfigDir), memberlistConfigDir} {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			continue
		}
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Remove(d) })
	}
	return withVolumes([]volume{{dir, memberlistConfigDir}}, argv)
}

// volume is a directory of the trial's and the path a pod would see it
// at.
type volume struct{ dir, at string }

// withVolumes runs argv as a pod's container sees its volumes: in a
// mount namespace of its own, each volume's directory bound over its
// path (which must exist on the host).
func withVolumes(vs []volume, argv []string) []string {
	script := ""
	dirs := make([]string, len(vs))
	for i, v := range vs {
		script += fmt.Sprintf(`mount --bind "$%d" %s && `, i, v.at)
		dirs[i] = v.dir
	}
	// sh names its first argument $0: shift the rest of the
	// directories off before argv.
	script += fmt.Sprintf(`shift %d && exec "$@"`, len(vs)-1)
	return append(append([]string{"unshare", "--mount", "--propagation", "private", "sh", "-c", script}, dirs...), argv...)
}

// metallbFRRStartup is the frr.conf FRR starts from in MetalLB's speaker
// pods (the frr-startup ConfigMap of metallb-frr.yaml), until the
// speaker renders its own.
var metallbFRRStartup = []string{
	"frr version 8.0",
	"frr defaults traditional",
	"hostname Router",
	"line vty",
	"log file /etc/frr/frr.log informational",
}

// metallbFRRNode starts on node h what a speaker pod of metallb-frr.yaml
// runs beside the speaker: FRR's zebra, bgpd and bfdd with the pod's
// options (the frr-startup ConfigMap's daemons file) and MetalLB's
// reloader (bin/metallb-frr/frr-reloader.sh), which applies the frr.conf
// the speaker writes with frr-reload.py on SIGHUP. The pod's volumes
// (/etc/frr, /var/run/frr, /var/log/frr) are directories of the trial
// bound over those paths in each process's own mount namespace, so the
// machine's FRR directories are not touched. The processes go into
// agents under the node's name and returns the reloader's directory
// (the pod's /etc/frr_reloader), where the speaker writes frr.conf and
// finds the reloader's PID.
func (pl *peerLab) metallbFRRNode(t testing.TB, h *netlab.Host, agents map[string]*netlab.Proc) string {
	t.Helper()
	script := fixture.Repo("bin/metallb-frr/frr-reloader.sh")
	if _, err := os.Stat(script); err != nil {
		t.Fatalf("MetalLB's FRR reloader not in bin/metallb-frr: run hack/build-peers.sh (%v)", err)
	}
	lab.RequireFRR(t)
	dir := lab.SharedDir(t, "metallb-frr-"+h.Name+"-")
	etc, run, logs, reloader := filepath.Join(dir, "etc"), filepath.Join(dir, "run"), filepath.Join(dir, "log"), filepath.Join(dir, "reloader")
	u, err := user.Lookup("frr")
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	for _, d := range []string{etc, run, logs, reloader} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if d != reloader {
			if err := os.Chown(d, uid, gid); err != nil {
				t.Fatal(err)
			}
		}
	}
	files := map[string]string{
		"frr.conf":   strings.Join(metallbFRRStartup, "\n") + "\n",
		"vtysh.conf": "service integrated-vtysh-config\n",
	}
	for name, text := range files {
		p := filepath.Join(etc, name)
		if err := os.WriteFile(p, []byte(text), 0o640); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	// pod runs argv with the pod's volumes at their paths.
	pod := func(argv ...string) []string {
		return withVolumes([]volume{{etc, "/etc/frr"}, {run, "/var/run/frr"}, {logs, "/var/log/frr"}}, argv)
	}
	// The daemons file's options; vty ports off (-P 0) as the lab's
	// own FRR runs, and logs on standard output for the trial's log.
	daemons := []struct{ name, ready string }{{"zebra", "zserv.api"}, {"bfdd", "bfdd.sock"}, {"bgpd", "bgpd.vty"}}
	for _, d := range daemons {
		argv := []string{"/usr/lib/frr/" + d.name, "-A", "127.0.0.1", "-P", "0", "--log", "stdout", "-f", os.DevNull}
		switch d.name {
		case "zebra":
			argv = append(argv, "-s", "90000000")
		case "bgpd":
			argv = append(argv, "-p", "0")
		}
		agents[h.Name+"-"+d.name] = h.Start("metallb-"+d.name, pod(argv...)...)
		lab.WaitFor(t, 10*time.Second, h.Name+" "+d.name+" up", func() bool {
			_, err := os.Stat(filepath.Join(run, d.ready))
			return err == nil
		})
	}
	agents[h.Name+"-reloader"] = h.Start("metallb-frr-reloader", pod("env", "SHARED_VOLUME="+reloader, "bash", script)...)
	lab.WaitFor(t, 10*time.Second, h.Name+" reloader up", func() bool {
		_, err := os.Stat(filepath.Join(reloader, "reloader.pid"))
		return err == nil
	})
	return reloader
}

// metallbHolder waits until one speaker alone has announced the
// Service for 3 s (its ServiceL2Status; until the speakers' memberlist
// has joined, each takes itself for the only one) and returns its node.
func metallbHolder(t testing.TB, pl *peerLab) string {
	t.Helper()
	dyn, err := dynamic.NewForConfig(pl.api.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	gvr := schema.GroupVersionResource{Group: "metallb.io", Version: "v1beta1", Resource: "servicel2statuses"}
	var holder string
	var since time.Time
	lab.WaitFor(t, 60*time.Second, "one speaker announcing "+peerServiceVIP, func() bool {
		l, err := dyn.Resource(gvr).Namespace(metallbNS).List(context.Background(), metav1.ListOptions{})
		if err != nil || len(l.Items) != 1 {
			since = time.Time{}
			return false
		}
		node, _, _ := unstructured.NestedString(l.Items[0].Object, "status", "node")
		if node != holder || since.IsZero() {
			holder, since = node, time.Now()
		}
		return time.Since(since) >= 3*time.Second
	})
	if pl.hosts[holder] == nil {
		t.Fatalf("ServiceL2Status names %q, not a node", holder)
	}
	return holder
}

// metallbObjects creates what MetalLB's manifests and a user's
// configuration put in the API before the Service: the namespace, the
// controller's Deployment (the memberlist secret's owner; nothing runs
// it here), the nodes with each speaker's pod, an IPAddressPool holding
// pool (CIDR) and an L2Advertisement for it, or with bgp a
// BGPAdvertisement and a BGPPeer for the lab's router (in metallbFRRBFD
// with a BFDProfile of 300 ms intervals, multiplier 3: MetalLB's
// defaults, and vipctl's).
func metallbObjects(t testing.TB, pl *peerLab, mode metallbMode, pool string) {
	t.Helper()
	ctx := context.Background()
	c := pl.admin
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: metallbNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, sa := range []string{"speaker", "controller"} {
		if _, err := c.CoreV1().ServiceAccounts(metallbNS).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	zero := int32(0)
	sel := map[string]string{"app": "metallb", "component": "controller"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "controller", Namespace: metallbNS, Labels: sel},
		Spec: appsv1.DeploymentSpec{
			Replicas: &zero,
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sel},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "controller", Image: "quay.io/metallb/controller"}}},
			},
		},
	}
	if _, err := c.AppsV1().Deployments(metallbNS).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The controller's own pod (metallbControllerPod): since v0.16 it
	// reads it at startup, as the owner of its ConfigurationState.
	no := false
	ctrl := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: metallbControllerPod, Namespace: metallbNS, Labels: sel},
		Spec: corev1.PodSpec{ServiceAccountName: "controller", AutomountServiceAccountToken: &no,
			Containers: []corev1.Container{{Name: "controller", Image: "quay.io/metallb/controller"}}},
	}
	if _, err := c.CoreV1().Pods(metallbNS).Create(ctx, ctrl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for n, name := range pl.names {
		ip := pl.nodeIP(n)
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}}
		created, err := c.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		created.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}
		created.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		if _, err := c.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "speaker-" + name, Namespace: metallbNS,
				Labels: map[string]string{"app": "metallb", "component": "speaker"}},
			Spec: corev1.PodSpec{NodeName: name, HostNetwork: true, ServiceAccountName: "speaker", AutomountServiceAccountToken: &no,
				Containers: []corev1.Container{{Name: "speaker", Image: "quay.io/metallb/speaker"}}},
		}
		cp, err := c.CoreV1().Pods(metallbNS).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cp.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}, HostIP: ip,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
		if _, err := c.CoreV1().Pods(metallbNS).UpdateStatus(ctx, cp, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	dyn, err := dynamic.NewForConfig(pl.api.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	type object struct {
		version, resource string
		obj               map[string]any
	}
	objects := []object{{"v1beta1", "ipaddresspools", map[string]any{"kind": "IPAddressPool", "spec": map[string]any{"addresses": []any{pool}}}}}
	if mode.bgp() {
		peer := map[string]any{"myASN": int64(64513), "peerASN": int64(64512), "peerAddress": "198.51.100.1"}
		if mode == metallbFRRBFD {
			objects = append(objects, object{"v1beta1", "bfdprofiles", map[string]any{"kind": "BFDProfile",
				"spec": map[string]any{"receiveInterval": int64(300), "transmitInterval": int64(300), "detectMultiplier": int64(3)}}})
			peer["bfdProfile"] = "peers"
		}
		objects = append(objects,
			object{"v1beta2", "bgppeers", map[string]any{"kind": "BGPPeer", "spec": peer}},
			object{"v1beta1", "bgpadvertisements", map[string]any{"kind": "BGPAdvertisement", "spec": map[string]any{"ipAddressPools": []any{"peers"}}}})
	} else {
		objects = append(objects, object{"v1beta1", "l2advertisements", map[string]any{"kind": "L2Advertisement", "spec": map[string]any{"ipAddressPools": []any{"peers"}}}})
	}
	for _, o := range objects {
		obj := &unstructured.Unstructured{Object: o.obj}
		obj.SetAPIVersion("metallb.io/" + o.version)
		obj.SetName("peers")
		obj.SetNamespace(metallbNS)
		gvr := schema.GroupVersionResource{Group: "metallb.io", Version: o.version, Resource: o.resource}
		if _, err := dyn.Resource(gvr).Namespace(metallbNS).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			t.Fatalf("%s: %v", o.resource, err)
		}
	}
}

// echoService creates the echo LoadBalancer Service
// (externalTrafficPolicy Cluster) with annotations and, as the
// endpoint-slice and endpoints controllers would for its pods, an
// EndpointSlice and an Endpoints with a ready endpoint on every node
// (kube-vip reads Endpoints unless told otherwise).
func (pl *peerLab) echoService(t testing.TB, annotations map[string]string) {
	t.Helper()
	if err := pl.createEchoService(context.Background(), "echo", false, annotations); err != nil {
		t.Fatal(err)
	}
}

// createEchoService is echoService for a Service called name, IPv6 alone
// if ipv6.
func (pl *peerLab) createEchoService(ctx context.Context, name string, ipv6 bool, annotations map[string]string) error {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault, Annotations: annotations},
		// No node ports: nothing here takes traffic through them, and
		// 5000 Services would exhaust their range.
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 8080}},
			ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyTypeCluster, AllocateLoadBalancerNodePorts: ptr.To(false)},
	}
	addressType, nodeIP := discoveryv1.AddressTypeIPv4, pl.nodeIP
	if ipv6 {
		single := corev1.IPFamilyPolicySingleStack
		svc.Spec.IPFamilyPolicy, svc.Spec.IPFamilies = &single, []corev1.IPFamily{corev1.IPv6Protocol}
		addressType, nodeIP = discoveryv1.AddressTypeIPv6, pl.nodeIP6
	}
	if _, err := pl.admin.CoreV1().Services(svc.Namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return err
	}
	ready := true
	port, proto, portName := int32(8080), corev1.ProtocolTCP, ""
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-1", Namespace: svc.Namespace,
			Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: addressType,
		Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: &port, Protocol: &proto}},
	}
	//nolint:staticcheck // Endpoints: what kube-vip reads by default.
	subset := corev1.EndpointSubset{Ports: []corev1.EndpointPort{{Port: port, Protocol: proto}}}
	for n, node := range pl.names {
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{nodeIP(n)},
			Conditions: discoveryv1.EndpointConditions{Ready: &ready},
			NodeName:   &node,
		})
		//nolint:staticcheck // Endpoints: what kube-vip reads by default.
		subset.Addresses = append(subset.Addresses, corev1.EndpointAddress{IP: nodeIP(n), NodeName: &node})
	}
	if _, err := pl.admin.DiscoveryV1().EndpointSlices(svc.Namespace).Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		return err
	}
	//nolint:staticcheck // Endpoints: what kube-vip reads by default.
	ep := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: svc.Namespace}, Subsets: []corev1.EndpointSubset{subset}}
	//nolint:staticcheck // Endpoints: what kube-vip reads by default.
	_, err := pl.admin.CoreV1().Endpoints(svc.Namespace).Create(ctx, ep, metav1.CreateOptions{})
	return err
}
