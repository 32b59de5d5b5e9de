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
	"time"

	"github.com/vipctl/vipctl/pkg/onnode"
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
	vrrp := readPID(t, filepath.Join(n.Target.Root, onnode.VRRPPIDFile))
	parent := readPID(t, filepath.Join(n.Target.Root, onnode.KeepalivedPIDFile))
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

// VRRPStats are one VRRP instance's counters as keepalived writes them on
// SIGUSR2 (keepalived.stats), by "section/counter": "Advertisements/
// Received", "Packet Errors/Address List", "Authentication Errors/Type
// Mismatch", "Became master" and so on.
type VRRPStats map[string]uint64

// Errors sums the counters of adverts an instance received and dropped:
// wrong length, TTL, type, interval or address list, and authentication
// that did not match. An advert of another VRRP router that reached an
// instance (the same VRID from another speaker) shows here.
func (s VRRPStats) Errors() uint64 {
	var n uint64
	for k, v := range s {
		if strings.HasPrefix(k, "Packet Errors/") || strings.HasPrefix(k, "Authentication Errors/") {
			n += v
		}
	}
	return n
}

// KeepalivedStats asks the node's keepalived for its counters.
func (n *Node) KeepalivedStats(t testing.TB) map[string]VRRPStats {
	t.Helper()
	return ReadKeepalivedStats(t, filepath.Join(n.Target.Root, onnode.KeepalivedPIDFile), filepath.Join(n.Target.Root, tmpDir))
}

// ReadKeepalivedStats has the keepalived whose parent wrote pidFile write
// its statistics (SIGUSR2) into tmp (its TMPDIR) and reads them, by
// instance name.
func ReadKeepalivedStats(t testing.TB, pidFile, tmp string) map[string]VRRPStats {
	t.Helper()
	path := filepath.Join(tmp, "keepalived.stats")
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if err := syscall.Kill(readPID(t, pidFile), syscall.SIGUSR2); err != nil {
		t.Fatal(err)
	}
	var out map[string]VRRPStats
	// The VRRP child writes the file after the parent passes the signal
	// on; it is whole once its last instance's last line is there.
	WaitFor(t, 5*time.Second, "keepalived's statistics in "+path, func() bool {
		data, err := os.ReadFile(path)
		if err != nil || !strings.HasSuffix(string(data), "\n") {
			return false
		}
		out = parseKeepalivedStats(string(data))
		for _, s := range out {
			if _, ok := s["Priority Zero/Sent"]; !ok {
				return false
			}
		}
		return len(out) > 0
	})
	return out
}

func parseKeepalivedStats(data string) map[string]VRRPStats {
	out := map[string]VRRPStats{}
	var inst, section string
	for _, line := range strings.Split(data, "\n") {
		name, value, _ := strings.Cut(strings.TrimSpace(line), ":")
		value = strings.TrimSpace(value)
		switch {
		case strings.HasPrefix(line, "VRRP Instance:"):
			inst = value
			out[inst] = VRRPStats{}
		case inst == "" || name == "":
		case value == "":
			section = name
		default:
			var v uint64
			if _, err := fmt.Sscanf(value, "%d", &v); err != nil {
				continue
			}
			key := name
			if strings.HasPrefix(line, "    ") {
				key = section + "/" + name
			}
			out[inst][key] = v
		}
	}
	return out
}
