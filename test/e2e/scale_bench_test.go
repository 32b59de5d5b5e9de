package e2e

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/test/e2e/failoverbench"
	"github.com/vipctl/vipctl/test/lab"
)

var (
	scaleServices = flag.Int("scale-services", 5000, "BenchmarkScale: LoadBalancer Services loaded before the measurements")
	scaleAdds     = flag.Int("scale-adds", 100, "BenchmarkScale: Services added one at a time and timed to their first TCP answer")
	scaleSample   = flag.Int("scale-sample", 500, "BenchmarkScale: the lost holder's VIPs probed from the client after node loss "+
		"(the kernel's IPv6 neighbour table, shared by every namespace of the machine, holds 1024 entries)")
	scaleUntouched   = flag.Int("scale-untouched", 20, "BenchmarkScale: loaded VIPs polled while Services are added")
	scaleLossProfile = flag.String("scale-loss-profile", "", "BenchmarkScale: write a CPU profile of the benchmark process (sidecars, client) from the node loss until every sampled VIP answered")
	scaleLossTrials  = flag.Int("scale-loss-trials", 5, "BenchmarkScale: node losses of a single-VIP lab, the baseline (a fresh lab each)")
	scaleProfile     = flag.String("scale-profile", "fast", "BenchmarkScale: the VRRP profile")
	scaleInstances   = flag.Int("scale-instances", 0, "BenchmarkScale: the pool's VRRP instances (0: its default)")
	scaleAnnounce    = flag.String("scale-announce", "sidecar", "BenchmarkScale: the pool's announce (sidecar, the one for thousands of Services; keepalived, the pool's default, does not settle at 5000)")
)

// One pool, its default instances, on every node; IPv6 because 5000
// addresses do not fit the IPv4 documentation ranges. The client is on
// 2001:db8:100::/64, so the addresses are on its link.
var (
	scalePool  = netip.MustParsePrefix("2001:db8:100::1:0/112")
	scalePools = fmt.Sprintf("  servicePools:\n    - name: scale\n      addresses: [%q]\n", scalePool)
)

const scalePort = 8080

// BenchmarkScale loads LoadBalancer Services into a three-node lab with
// the real apiserver, allocator, sidecars and keepalived, and measures
// from the client namespace:
//
//	scale case=add vips=N adds=A p50_ms= p95_ms= max_ms= alloc_p50_ms= on_if_p50_ms=
//	scale case=untouched vips=N polled=U requests=R failed_requests=F no_handshake=H vrrp_state_changes=C
//	  failure_bursts=B addr_removals=A answer_moves=M poller_stalls=P echo_stalls=E bench_stalls=S (one line)
//	scale case=reload vips=N p50_ms= p95_ms= max_ms= keepalived_rss_mib= vrrp_rss_mib=
//	scale case=node-loss vips=1 lost=1 trials=T p50_ms= p95_ms= max_ms=
//	scale case=node-loss vips=N lost=L sampled=S p50_ms= p95_ms= max_ms= anchor_ms= told_max_ms= told_seen= on_if_max_ms= on_if_seen=
//	  single_vip_ms= single_vip_max_ms= (one line)
//
// add: Service created → its address answering TCP (allocated, rendered,
// keepalived reloaded, neighbour discovery, handshake); untouched: HTTP
// requests to loaded VIPs that failed meanwhile, the echo servers and the
// poller being labprobe processes of their own, so that a stall of the
// benchmark process cannot fail one (pollUntouched logs the bursts,
// what happened around each, every process's stalls); reload: keepalived.conf
// written → the new address on the holder's interface, and keepalived's
// resident set; node-loss: the node holding the most VIPs (of every
// instance it is master of) leaves the network and its keepalived dies
// (a node powered off) → each of a sample of its
// VIPs answers again (anchor: the first anchor of the pool on the new
// holder's interface, keepalived's failover; told: every one of them
// announced by the new holder, as heard by the client, which moves a
// client that knows it;
// on_if: every one of them on the new holder's interface or, proxied,
// with its table-local route there, which comes last), with the
// same measured on a lab holding a single Service (single_vip_ms, the
// median). `make bench-scale` prints the lines.
func BenchmarkScale(b *testing.B) {
	// The loaded lab's poll samples -scale-untouched of its addresses:
	// refused here, not as an index out of range after the single-VIP
	// trials.
	if *scaleServices < 1 || *scaleUntouched < 0 || *scaleUntouched > *scaleServices {
		b.Fatalf("-scale-services %d -scale-untouched %d: want at least one Service, and 0 to -scale-services of them polled", *scaleServices, *scaleUntouched)
	}
	for b.Loop() {
		// A lab per single-VIP trial: each node loss needs a fresh one
		// (nodeLoss).
		var single []time.Duration
		for trial := 0; trial < *scaleLossTrials; trial++ {
			b.Run(fmt.Sprintf("single-%d", trial), func(b *testing.B) {
				outage, _, _, _ := startScale(b, 1).nodeLoss(b)
				single = append(single, outage...)
			})
		}
		sortDurations(single)
		fmt.Printf("scale case=node-loss vips=1 lost=1 trials=%d p50_ms=%d p95_ms=%d max_ms=%d\n",
			len(single), failoverbench.PercentileMS(single, 50), failoverbench.PercentileMS(single, 95), failoverbench.PercentileMS(single, 100))
		b.Run("loaded", func(b *testing.B) {
			s := startScale(b, *scaleServices)
			s.addAndPoll(b)
			outages, onIf, told, anchor := s.nodeLoss(b)
			fmt.Printf("scale case=node-loss vips=%d lost=%d sampled=%d p50_ms=%d p95_ms=%d max_ms=%d anchor_ms=%d told_max_ms=%d told_seen=%d on_if_max_ms=%d on_if_seen=%d single_vip_ms=%d single_vip_max_ms=%d\n",
				len(s.vips), s.lost, min(*scaleSample, s.lost), failoverbench.PercentileMS(outages, 50), failoverbench.PercentileMS(outages, 95), failoverbench.PercentileMS(outages, 100),
				anchor.Milliseconds(), failoverbench.PercentileMS(told, 100), len(told), failoverbench.PercentileMS(onIf, 100), len(onIf), failoverbench.PercentileMS(single, 50), failoverbench.PercentileMS(single, 100))
		})
	}
}

// scaleLab is a loaded lab: its cluster, the loaded Services' addresses,
// and every address each node gained, when.
type scaleLab struct {
	kc    *lab.KubeCluster
	admin kubernetes.Interface
	vips  []netip.Addr
	added *addrLog
	lost  int // VIPs of the last node lost
	// probeBin is labprobe, echoes the nodes' echo servers it runs:
	// outside the benchmark process, whose stalls they would otherwise
	// share (pollUntouched).
	probeBin string
	echoes   []*lab.ProbeProc
}

func startScale(b *testing.B, services int) *scaleLab {
	specs := masters(3)
	for i := range specs {
		specs[i].Addr6 = fmt.Sprintf("2001:db8:100::%d/64", 11+i)
	}
	pools := scalePools
	if *scaleInstances > 0 {
		pools += fmt.Sprintf("      instances: %d\n", *scaleInstances)
	}
	if *scaleAnnounce != "" {
		pools += fmt.Sprintf("      announce: %s\n", *scaleAnnounce)
	}
	kc := lab.StartKube(b, clusterYAML(*scaleProfile, "unicast", pools), specs)
	cfg := kc.API.AdminConfig()
	cfg.QPS, cfg.Burst = 500, 1000 // Services are created in bulk
	s := &scaleLab{kc: kc, admin: kubernetes.NewForConfigOrDie(cfg), added: watchAddrs(b, kc), probeBin: lab.BuildProbe(b)}
	kc.Deploy(b)
	for _, n := range kc.Nodes {
		kc.AddNode(b, n.Name)
		s.echoes = append(s.echoes, lab.StartEchoProcess(b, s.probeBin, n.Host, fmt.Sprintf("[::]:%d", scalePort), n.Name))
	}
	ctx := context.Background()
	start := time.Now()
	parallel(b, services, 16, func(i int) error {
		_, err := s.admin.CoreV1().Services("default").Create(ctx, benchService(fmt.Sprintf("load-%05d", i)), metav1.CreateOptions{})
		return err
	})
	lab.WaitFor(b, 15*time.Minute, fmt.Sprintf("%d Services allocated", services), func() bool {
		time.Sleep(time.Second)
		return countAllocated(b, s.admin) >= services
	})
	b.Logf("%d Services created and allocated in %s", services, time.Since(start).Round(time.Millisecond))
	list, err := s.admin.CoreV1().Services("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	for _, svc := range list.Items {
		for _, in := range svc.Status.LoadBalancer.Ingress {
			s.vips = append(s.vips, netip.MustParseAddr(in.IP))
		}
	}
	start = time.Now()
	for _, n := range kc.Nodes {
		kc.StartSidecar(b, n.Name)
	}
	s.waitHeldOnce(b, s.vips, 10*time.Minute)
	settled := time.Since(start).Round(time.Millisecond)
	proxied := 0
	for _, n := range kc.Nodes {
		got, err := n.Host.Exec("ip", "-6", "neigh", "show", "proxy", "dev", "br-ex")
		if err != nil {
			b.Fatal(err)
		}
		proxied += strings.Count(string(got), " proxy")
	}
	b.Logf("all %d VIPs held by one node each %s after the sidecars started, %d of them by proxy neighbour entries", len(s.vips), settled, proxied)
	return s
}

// addAndPoll adds Services one at a time, each timed from its create call
// to its address answering, while the client polls a sample of the
// loaded VIPs (pollUntouched); then reports keepalived's reloads and
// resident set.
func (s *scaleLab) addAndPoll(b *testing.B) {
	ctx := context.Background()
	polled := s.pollUntouched(b)
	before := s.kc.Mark()
	var answer, alloc, onIf, reload []time.Duration
	for i := 0; i < *scaleAdds; i++ {
		name := fmt.Sprintf("add-%03d", i)
		t0 := time.Now()
		if _, err := s.admin.CoreV1().Services("default").Create(ctx, benchService(name), metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		var vip netip.Addr
		lab.WaitFor(b, time.Minute, name+" allocated", func() bool {
			svc, err := s.admin.CoreV1().Services("default").Get(ctx, name, metav1.GetOptions{})
			if err == nil && len(svc.Status.LoadBalancer.Ingress) > 0 {
				vip = netip.MustParseAddr(svc.Status.LoadBalancer.Ingress[0].IP)
				return true
			}
			time.Sleep(5 * time.Millisecond)
			return false
		})
		alloc = append(alloc, time.Since(t0))
		first, err := s.kc.FirstAnswers([]netip.AddrPort{netip.AddrPortFrom(vip, scalePort)}, 50*time.Millisecond, time.Minute)
		if err != nil {
			b.Fatal(err)
		}
		if first[0].IsZero() {
			b.Fatalf("%s (%s) never answered", name, vip)
		}
		answer = append(answer, first[0].Sub(t0))
		holder, at := s.added.first(vip, t0)
		if holder == "" {
			b.Logf("%s answered but no node's address notifications named %s", name, vip)
			s.vips = append(s.vips, vip)
			continue
		}
		onIf = append(onIf, at.Sub(t0))
		if st, err := os.Stat(filepath.Join(s.kc.ByName[holder].Target.Root, onnode.KeepalivedConfPath)); err == nil && st.ModTime().After(t0) {
			reload = append(reload, at.Sub(st.ModTime()))
		}
		s.vips = append(s.vips, vip)
	}
	u := polled.stop(b, s)
	transitions := s.kc.Transitions(before)
	for _, t := range transitions {
		b.Logf("during the additions: %s", t)
	}
	sortDurations(answer)
	sortDurations(alloc)
	sortDurations(onIf)
	fmt.Printf("scale case=add vips=%d adds=%d p50_ms=%d p95_ms=%d max_ms=%d alloc_p50_ms=%d on_if_p50_ms=%d\n",
		len(s.vips), len(answer), failoverbench.PercentileMS(answer, 50), failoverbench.PercentileMS(answer, 95), failoverbench.PercentileMS(answer, 100), failoverbench.PercentileMS(alloc, 50), failoverbench.PercentileMS(onIf, 50))
	fmt.Printf("scale case=untouched vips=%d polled=%d requests=%d failed_requests=%d no_handshake=%d vrrp_state_changes=%d "+
		"failure_bursts=%d addr_removals=%d answer_moves=%d poller_stalls=%d echo_stalls=%d bench_stalls=%d\n",
		len(s.vips), len(polled.urls), u.requests, u.failed, u.noHandshake, len(transitions),
		u.bursts, u.removals, u.moves, u.pollerStalls, u.echoStalls, u.benchStalls)
	total, vrrp := s.keepalivedRSS(b)
	sortDurations(reload)
	fmt.Printf("scale case=reload vips=%d reloads=%d p50_ms=%d p95_ms=%d max_ms=%d keepalived_rss_mib=%d vrrp_rss_mib=%d\n",
		len(s.vips), len(reload), failoverbench.PercentileMS(reload, 50), failoverbench.PercentileMS(reload, 95), failoverbench.PercentileMS(reload, 100), total, vrrp)
}

// nodeLoss takes the node holding the most VIPs off the network and times each of (a sample of) its VIPs until it
// answers from the client again, and each until it is on another node's
// interface. Once per lab: after the node comes back, the client's
// neighbour entries still name the interim holder (the returning master
// never left MASTER, so it announces nothing), which keeps answering
// through its local routes for a while; a second loss would time that,
// not a failover.
func (s *scaleLab) nodeLoss(b *testing.B) (outages, onIf, told []time.Duration, anchor time.Duration) {
	holder, vips := s.biggestHolder(b)
	s.lost = len(vips)
	sample := vips
	if len(sample) > *scaleSample {
		sample = nil
		for i := 0; i < *scaleSample; i++ {
			sample = append(sample, vips[i*len(vips) / *scaleSample])
		}
	}
	targets := make([]netip.AddrPort, len(sample))
	for i, v := range sample {
		targets[i] = netip.AddrPortFrom(v, scalePort)
	}
	if *scaleLossProfile != "" {
		f, err := os.Create(*scaleLossProfile)
		if err != nil {
			b.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			b.Fatal(err)
		}
		defer func() { pprof.StopCPUProfile(); _ = f.Close() }()
	}
	heard := s.kc.Client.CaptureAnnouncements(b)
	fault := time.Now()
	s.kc.ByName[holder].Host.LinkDown()
	// A lost node stops: powered off, nothing on it runs. Cut off only,
	// its keepalived would become master of every instance after the
	// master-down interval and its sidecar add the other instance's
	// 2549 addresses, on the survivor's two cores, the lab's only ones
	// (on a real network, on the lost node's own CPU). Its addresses stay
	// on its interface, as they would on a dead node.
	s.kc.ByName[holder].CrashKeepalived(b)
	// Minutes, not one: with announce: sidecar at 5000 the last IPv6
	// address answered after 30 s (the kernel's cost per address,
	// docs/benchmarks.md), and a loaded machine doubles that.
	first, err := s.kc.FirstAnswers(targets, 100*time.Millisecond, 3*time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	for i, at := range first {
		if at.IsZero() {
			b.Fatalf("%s never answered after %s left", sample[i], holder)
		}
		outages = append(outages, at.Sub(fault))
	}
	// A proxied address's local route is written once every window has
	// answered and been announced, so it can trail the answers.
	lab.WaitUntil(10*time.Second, func() bool {
		for _, v := range vips {
			if node, _ := s.added.first(v, fault); node == "" {
				time.Sleep(50 * time.Millisecond)
				return false
			}
		}
		return true
	})
	lab.WaitUntil(10*time.Second, func() bool {
		if heard.LastFirst(vips).IsZero() {
			time.Sleep(50 * time.Millisecond)
			return false
		}
		return true
	})
	for _, v := range vips {
		if at := heard.First(v); !at.IsZero() {
			told = append(told, at.Sub(fault))
		}
	}
	for _, v := range vips {
		node, at := s.added.first(v, fault)
		if node == "" {
			b.Logf("%s: no address notification after %s left", v, holder)
			continue
		}
		onIf = append(onIf, at.Sub(fault))
	}
	sortDurations(outages)
	sortDurations(onIf)
	sortDurations(told)
	skip := map[netip.Addr]bool{}
	for _, v := range s.vips {
		skip[v] = true
	}
	// The survivors' own account: how long into the sync every address
	// was announced and in place.
	for name, sc := range s.kc.Sidecars {
		for _, line := range strings.Split(sc.Log.String(), "\n") {
			if strings.Contains(line, "Service addresses added") {
				if f := strings.Fields(line); len(f) > 0 {
					if at, err := time.Parse(time.RFC3339Nano, strings.TrimPrefix(f[0], "time=")); err == nil && at.After(fault) {
						b.Logf("%s (%s after the fault): %s", name, at.Sub(fault).Round(time.Millisecond), line)
					}
				}
			}
		}
	}
	anchor = -time.Millisecond
	if a, at := s.added.firstOther(scalePool, skip, fault); !at.IsZero() {
		anchor = at.Sub(fault)
		b.Logf("the first anchor taken over: %s, %s after the fault", a, anchor.Round(time.Millisecond))
	}
	b.Logf("%s lost %d VIPs: %d sampled answered within %s, %d announced to the client within %d ms, %d seen on another interface within %d ms",
		holder, len(vips), len(sample), outages[len(outages)-1].Round(time.Millisecond), len(told), failoverbench.PercentileMS(told, 100), len(onIf), failoverbench.PercentileMS(onIf, 100))
	return outages, onIf, told, anchor
}

// biggestHolder is the node holding the most VIPs, and its VIPs (those of
// every instance it is master of).
func (s *scaleLab) biggestHolder(b *testing.B) (string, []netip.Addr) {
	held := s.held(b)
	by := map[string][]netip.Addr{}
	for _, v := range s.vips {
		if h := held[v]; len(h) == 1 {
			by[h[0]] = append(by[h[0]], v)
		}
	}
	var best string
	for n, vs := range by {
		if best == "" || len(vs) > len(by[best]) {
			best = n
		}
	}
	if best == "" {
		b.Fatal("no VIP is held")
	}
	return best, by[best]
}

// held lists, for every address a node answers for on br-ex (an address
// on it, or a proxy neighbour entry: announce: sidecar with the
// MachineConfig's settings), the nodes that do.
func (s *scaleLab) held(b *testing.B) map[netip.Addr][]string {
	out := map[netip.Addr][]string{}
	for _, n := range s.kc.Nodes {
		got, err := n.Host.Exec("ip", "-o", "-6", "addr", "show", "dev", "br-ex")
		if err != nil {
			b.Fatal(err)
		}
		for _, l := range strings.Split(string(got), "\n") {
			f := strings.Fields(l)
			if len(f) < 4 {
				continue
			}
			if p, err := netip.ParsePrefix(f[3]); err == nil {
				out[p.Addr()] = append(out[p.Addr()], n.Name)
			}
		}
		got, err = n.Host.Exec("ip", "-6", "neigh", "show", "proxy", "dev", "br-ex")
		if err != nil {
			b.Fatal(err)
		}
		for _, l := range strings.Split(string(got), "\n") {
			if f := strings.Fields(l); len(f) > 0 {
				if a, err := netip.ParseAddr(f[0]); err == nil && !slices.Contains(out[a], n.Name) {
					out[a] = append(out[a], n.Name)
				}
			}
		}
	}
	return out
}

// waitHeldOnce waits until every one of vips is on exactly one node's
// interface, and stays so for 3 s.
func (s *scaleLab) waitHeldOnce(b *testing.B, vips []netip.Addr, timeout time.Duration) {
	var since time.Time
	var last string
	lab.WaitFor(b, timeout, "every VIP held by one node", func() bool {
		held := s.held(b)
		bad := 0
		for _, v := range vips {
			if len(held[v]) != 1 {
				bad++
			}
		}
		if now := fmt.Sprintf("%d", bad); now != last {
			b.Logf("%d of %d VIPs not held by exactly one node", bad, len(vips))
			last = now
		}
		if bad > 0 {
			since = time.Time{}
			time.Sleep(500 * time.Millisecond)
			return false
		}
		if since.IsZero() {
			since = time.Now()
		}
		time.Sleep(500 * time.Millisecond)
		return time.Since(since) > 3*time.Second
	})
}

// keepalivedRSS is the resident set of the keepalived processes (parent
// and children) of the node holding the most VIPs, and of its VRRP child
// alone, in MiB.
func (s *scaleLab) keepalivedRSS(b *testing.B) (total, vrrp int) {
	holder, _ := s.biggestHolder(b)
	parent := s.kc.ByName[holder].Keepalived.PID()
	pids := append([]int{parent}, childPIDs(parent)...)
	for _, pid := range pids {
		kb := procStatusKB(pid, "VmRSS:")
		total += kb
		if pid != parent && strings.Contains(readCmdline(pid), "keepalived") && vrrp < kb {
			vrrp = kb // the largest child: the VRRP process holds the addresses
		}
	}
	return (total + 1023) / 1024, (vrrp + 1023) / 1024
}

func childPIDs(parent int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so read after ')'.
		f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(parent) {
			out = append(out, pid)
		}
	}
	return out
}

func readCmdline(pid int) string {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return string(data)
}

// procStatusKB is a field of /proc/PID/status in kB, 0 if it cannot be read.
func procStatusKB(pid int, field string) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field); ok {
			kb, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return kb
		}
	}
	return 0
}

// addrLog remembers when each node gained each address, from netlink
// notifications in the nodes' namespaces: the lab's view of keepalived
// adding a VIP, to the millisecond, without listing thousands of
// addresses over and over.
type addrLog struct {
	mu    sync.Mutex
	added map[netip.Addr][]addrEvent
	// removed: what an untouched VIP's failures are checked against
	// (pollUntouched).
	removed map[netip.Addr][]addrEvent
}

type addrEvent struct {
	node string
	at   time.Time
}

// watchAddrs records every address a node gains or loses, and every local
// route vipctl writes on it (table local, protocol 118) as a gain: the
// kernel sends no notification for a proxy neighbour entry; the sidecar
// writes a proxied address's local route with its entry or, where the
// takeover routes already accept it, after every entry.
func watchAddrs(b *testing.B, kc *lab.KubeCluster) *addrLog {
	l := &addrLog{added: map[netip.Addr][]addrEvent{}, removed: map[netip.Addr][]addrEvent{}}
	done := make(chan struct{})
	b.Cleanup(func() { close(done) })
	record := func(events map[netip.Addr][]addrEvent, ip net.IP, node string) {
		a, ok := netip.AddrFromSlice(ip)
		if !ok {
			return
		}
		l.mu.Lock()
		events[a.Unmap()] = append(events[a.Unmap()], addrEvent{node: node, at: time.Now()})
		l.mu.Unlock()
	}
	for _, n := range kc.Nodes {
		h, err := netns.GetFromName(n.Host.NS)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = h.Close() })
		// Thousands of addresses come at once: a buffer the kernel would
		// otherwise overflow (ENOBUFS ends the subscription).
		keepFollowing(done, func() chan netlink.AddrUpdate {
			updates := make(chan netlink.AddrUpdate, 65536)
			opts := netlink.AddrSubscribeOptions{Namespace: &h, ReceiveBufferSize: 32 << 20, ReceiveBufferForceSize: true,
				ErrorCallback: func(err error) { b.Logf("%s: following addresses: %v", n.Name, err) }}
			if err := netlink.AddrSubscribeWithOptions(updates, done, opts); err != nil {
				b.Fatal(err)
			}
			return updates
		}, func(u netlink.AddrUpdate) {
			if u.NewAddr {
				record(l.added, u.LinkAddress.IP, n.Name)
			} else {
				record(l.removed, u.LinkAddress.IP, n.Name)
			}
		})
		keepFollowing(done, func() chan netlink.RouteUpdate {
			updates := make(chan netlink.RouteUpdate, 65536)
			opts := netlink.RouteSubscribeOptions{Namespace: &h, ReceiveBufferSize: 32 << 20, ReceiveBufferForceSize: true,
				ErrorCallback: func(err error) { b.Logf("%s: following routes: %v", n.Name, err) }}
			if err := netlink.RouteSubscribeWithOptions(updates, done, opts); err != nil {
				b.Fatal(err)
			}
			return updates
		}, func(u netlink.RouteUpdate) {
			if u.Type == unix.RTM_NEWROUTE && u.Table == unix.RT_TABLE_LOCAL && u.Protocol == 118 && u.Dst != nil {
				record(l.added, u.Dst.IP, n.Name)
			}
		})
	}
	return l
}

// keepFollowing hands everything subscribe's channel delivers to handle
// until done, subscribing again whenever a subscription ends (one that
// overflowed ends).
func keepFollowing[T any](done chan struct{}, subscribe func() chan T, handle func(T)) {
	updates := subscribe()
	go func() {
		for {
			for u := range updates {
				handle(u)
			}
			select {
			case <-done:
				return
			default:
				updates = subscribe()
			}
		}
	}()
}

// first is the first node that gained a after since, and when (the
// earliest: address and route events come from goroutines of their own).
func (l *addrLog) first(a netip.Addr, since time.Time) (string, time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	best := earliest(l.added[a], since)
	return best.node, best.at
}

// earliest is the first of events after since (zero if none).
func earliest(events []addrEvent, since time.Time) addrEvent {
	var best addrEvent
	for _, e := range events {
		if e.at.After(since) && (best.at.IsZero() || e.at.Before(best.at)) {
			best = e
		}
	}
	return best
}

// firstOther is the first address gained since then in prefix that is not
// one of skip, and when: a pool's anchor, on a failover of the pool's
// instances.
func (l *addrLog) firstOther(prefix netip.Prefix, skip map[netip.Addr]bool, since time.Time) (netip.Addr, time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var best netip.Addr
	var at time.Time
	for a, events := range l.added {
		if skip[a] || !prefix.Contains(a) {
			continue
		}
		if e := earliest(events, since); !e.at.IsZero() && (at.IsZero() || e.at.Before(at)) {
			best, at = a, e.at
		}
	}
	return best, at
}

func sortDurations(d []time.Duration) { sort.Slice(d, func(i, j int) bool { return d[i] < d[j] }) }
