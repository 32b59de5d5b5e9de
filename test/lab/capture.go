package lab

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vipctl/test/netlab"
)

// CaptureEnv names a directory: when it is set, every lab captures the
// packets of its client and of each node's VRRP interface with tcpdump
// (which must be installed), and a test that fails leaves them there, in
// a directory named after the test; a passing test's captures are
// dropped. For a failure the logs cannot explain, such as one lost SYN in
// a handover. Never set in CI.
const CaptureEnv = "VIPCTL_LAB_PCAP"

// capture captures nodes' packets, and the client's with withClient.
func (lc *Cluster) capture(t testing.TB, nodes []*Node, withClient bool) {
	dir := os.Getenv(CaptureEnv)
	if dir == "" {
		return
	}
	tcpdump, err := exec.LookPath("tcpdump")
	if err != nil {
		t.Fatalf("%s is set: %v", CaptureEnv, err)
	}
	tmp := t.TempDir()
	hosts := map[string]*netlab.Host{}
	if withClient {
		hosts["client"] = lc.Client
	}
	for _, n := range nodes {
		hosts[n.Name] = n.Host
	}
	for name, h := range hosts {
		iface := "br-ex"
		if h == lc.Client {
			iface = "eth0"
		}
		h.Start("tcpdump", tcpdump, "-i", iface, "-U", "-n", "-s", "256", "-w", filepath.Join(tmp, name+".pcap"))
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		out := filepath.Join(dir, strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())+time.Now().Format("-150405"))
		if err := os.MkdirAll(out, 0o755); err != nil {
			t.Log(err)
			return
		}
		for name := range hosts {
			b, err := os.ReadFile(filepath.Join(tmp, name+".pcap"))
			if err == nil {
				err = os.WriteFile(filepath.Join(out, name+".pcap"), b, 0o644)
			}
			if err != nil {
				t.Log(err)
			}
		}
		t.Logf("packet captures in %s", out)
	})
}

// Refusals records, with tcpdump on a host, every TCP reset and ICMP
// destination-unreachable the host receives or sends, with link-layer
// addresses: for a failed request ("connection refused"), who refused it.
type Refusals struct{ proc *netlab.Proc }

// StartRefusals starts recording on every interface of h; the test's end
// stops it. tcpdump comes from hack/install-deps.sh.
func StartRefusals(t testing.TB, h *netlab.Host) *Refusals {
	t.Helper()
	return &Refusals{proc: startTcpdump(t, h, "refusals", "-i", "any", "-e", "-n", "-tt", "-l", "-Q", "inout",
		"tcp[tcpflags] & tcp-rst != 0 or icmp[icmptype] == icmp-unreach or (icmp6 and ip6[40] == 1)")}
}

// startTcpdump runs tcpdump with args inside h as the test's process
// name; the test's end stops it. tcpdump comes from
// hack/install-deps.sh.
func startTcpdump(t testing.TB, h *netlab.Host, name string, args ...string) *netlab.Proc {
	t.Helper()
	tcpdump, err := exec.LookPath("tcpdump")
	if err != nil {
		t.Fatalf("tcpdump: %v (run hack/install-deps.sh)", err)
	}
	return h.Start(name, append([]string{tcpdump}, args...)...)
}

// Around returns the recorded packets from before each of times to after
// it, each line once, with its time of day.
func (r *Refusals) Around(times []time.Time, before, after time.Duration) string {
	data, _ := os.ReadFile(r.proc.Log)
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		stamp, rest, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		secs, err := strconv.ParseFloat(stamp, 64)
		if err != nil {
			continue
		}
		at := time.Unix(0, int64(secs*1e9))
		for _, f := range times {
			if !at.Before(f.Add(-before)) && !at.After(f.Add(after)) {
				out = append(out, at.Format("15:04:05.000000")+" "+rest)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}

// macRE matches a link-layer address in tcpdump's -e output.
var macRE = regexp.MustCompile(`\b[0-9a-f]{2}(:[0-9a-f]{2}){5}\b`)

// Who is Around in one line for a test's verdict: each packet the host
// received, its time, the sender named through names (link-layer
// address to node; unknown addresses stay as they are) and what tcpdump
// says of it, "; " between them, "nothing" when none came. Given hosts,
// only the packets from or to one of them (or an ICMP error about one):
// a client that also asks other servers (the cluster lab's control
// requests to each apiserver, whose every close ends in a reset) would
// fill the line before the failed address's packets.
func (r *Refusals) Who(times []time.Time, before, after time.Duration, names map[string]string, hosts ...string) string {
	var out []string
	for _, line := range strings.Split(r.Around(times, before, after), "\n") {
		stamp, rest, _ := strings.Cut(line, " ")
		if !strings.Contains(rest, " In ") || !namesAny(rest, hosts) {
			continue
		}
		sender := macRE.FindString(rest)
		if n, ok := names[sender]; ok {
			sender = n
		}
		// The packet itself follows tcpdump's "length N: ".
		if i := strings.Index(rest, ": "); i >= 0 {
			rest = rest[i+2:]
		}
		out = append(out, stamp+" from "+sender+": "+rest)
	}
	if len(out) == 0 {
		return "nothing"
	}
	return strings.Join(out, "; ")
}

// namesAny tells whether tcpdump's line names one of hosts as an end
// ("198.51.100.5.80", "2001:db8::5.80") or in an ICMP error ("ICMP
// 198.51.100.5 tcp port 80 unreachable"); no hosts: every line does.
func namesAny(line string, hosts []string) bool {
	if len(hosts) == 0 {
		return true
	}
	for _, h := range hosts {
		if strings.Contains(line, " "+h+".") || strings.Contains(line, " "+h+" ") || strings.Contains(line, " "+h+":") {
			return true
		}
	}
	return false
}
