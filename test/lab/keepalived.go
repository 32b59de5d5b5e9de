package lab

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/vipctl/vipctl/pkg/render"
)

// LogMark is where each node's keepalived log ended at some moment.
type LogMark map[string]int

// Mark notes where every node's keepalived log ends now.
func (lc *Cluster) Mark() LogMark {
	m := LogMark{}
	for _, n := range lc.Nodes {
		data, _ := os.ReadFile(n.Keepalived.Log)
		m[n.Name] = len(data)
	}
	return m
}

// keepalived logs every VRRP state change of an instance, also the ones a
// reload causes, as "(name) Entering MASTER STATE".
var transitionRE = regexp.MustCompile(`\((\w+)\) Entering (MASTER|BACKUP|FAULT) STATE`)

// Transitions lists, as "node: log line", the VRRP state changes keepalived
// logged on any node since m, of the named instances (of all when none is
// named).
func (lc *Cluster) Transitions(since LogMark, instances ...string) []string {
	var out []string
	for _, n := range lc.Nodes {
		data, _ := os.ReadFile(n.Keepalived.Log)
		for _, line := range strings.Split(string(data[min(since[n.Name], len(data)):]), "\n") {
			m := transitionRE.FindStringSubmatch(line)
			if m != nil && (len(instances) == 0 || slices.Contains(instances, m[1])) {
				out = append(out, n.Name+": "+strings.TrimSpace(line))
			}
		}
	}
	return out
}

// CrashKeepalived simulates the node's keepalived dying hard (lab-notes
// pitfall 1): SIGSTOP then SIGKILL both the parent and its VRRP child, so
// nothing hands over gracefully. The VIP stays on the interface (pitfall 2).
func (n *Node) CrashKeepalived(t testing.TB) {
	t.Helper()
	vrrp := readPID(t, filepath.Join(n.Target.Root, render.VRRPPIDFile))
	parent := readPID(t, filepath.Join(n.Target.Root, render.KeepalivedPIDFile))
	for _, sig := range []syscall.Signal{syscall.SIGSTOP, syscall.SIGKILL} {
		for _, pid := range []int{parent, vrrp} {
			_ = syscall.Kill(pid, sig)
		}
	}
}

func readPID(t testing.TB, path string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	if _, err := fmt.Sscanf(strings.TrimSpace(string(data)), "%d", &pid); err != nil || pid <= 1 {
		t.Fatalf("%s: bad pid %q", path, data)
	}
	return pid
}
