package lab

import (
	"os"
	"os/exec"
	"path/filepath"
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
