package lab

import (
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vipctl/test/netlab"
)

// Flows records, with tcpdump on a host, the headers of every TCP
// packet to or from the given ports: for a failed request, what the wire
// said of its connection. Which node answered the SYN, whether the
// request was acknowledged and by whom, what came back and when: a lost
// segment, a reset from a node that took the VIP over, and a server that
// answered late look alike in the client's error and apart here (the
// captures that told a starved echo pod from a lost request, 2026-11-30,
// were taken by hand; a CI run keeps no files, so the roll prints the
// story).
type Flows struct {
	pcap string
	proc *netlab.Proc
}

// StartFlows starts recording on every interface of h; the test's end
// stops it. A port named twice (a Service's and the routers' both 80) is
// filtered once.
func StartFlows(t testing.TB, h *netlab.Host, ports ...int) *Flows {
	t.Helper()
	var filter []string
	for _, p := range ports {
		if f := "port " + strconv.Itoa(p); !slices.Contains(filter, f) {
			filter = append(filter, f)
		}
	}
	pcap := filepath.Join(t.TempDir(), h.Name+"-flows.pcap")
	// 128 bytes hold the link, IPv6 and TCP headers with their options.
	proc := startTcpdump(t, h, "flows", "-i", "any", "-e", "-n", "-U", "-s", "128", "-w", pcap,
		"tcp and ("+strings.Join(filter, " or ")+")")
	return &Flows{pcap: pcap, proc: proc}
}

// localRE finds the client's address in a Poller's error ("request
// written from [2001:db8:100::100]:46012: Get ...").
var localRE = regexp.MustCompile(`from (\[[0-9a-fA-F:.]+\]:[0-9]+|[0-9.]+:[0-9]+):`)

// Story tells, in one line, what the capture holds of the connection a
// Poller's failed request (its error, err) opened to remote (host:port)
// from started on for span: each packet's milliseconds after the first,
// "out" for the host's own or the sender named through names (link-layer
// address to node, as Refusals.Who), its TCP flags and payload length.
// An error that names no connection (no dial got through) is told so.
func (f *Flows) Story(err, remote string, started time.Time, span time.Duration, names map[string]string) string {
	m := localRE.FindStringSubmatch(err)
	if m == nil {
		return "no connection"
	}
	lhost, lport, e1 := net.SplitHostPort(m[1])
	rhost, rport, e2 := net.SplitHostPort(remote)
	if e1 != nil || e2 != nil {
		return "no connection"
	}
	out, rerr := exec.Command("tcpdump", "-r", f.pcap, "-n", "-e", "-tt",
		fmt.Sprintf("tcp and host %s and port %s and host %s and port %s", lhost, lport, rhost, rport)).Output()
	// A capture still being written may end in half a packet, which
	// tcpdump reports after printing the whole ones.
	if rerr != nil && len(out) == 0 {
		return "capture unreadable: " + rerr.Error()
	}
	return story(string(out), m[1], started, span, names)
}

var (
	flagsRE  = regexp.MustCompile(`Flags \[([^\]]*)\]`)
	lengthRE = regexp.MustCompile(`, length ([0-9]+)`)
)

// story condenses tcpdump's lines (-e -tt, read back from the capture)
// of one connection from local.
func story(lines, local string, started time.Time, span time.Duration, names map[string]string) string {
	var out []string
	var first time.Time
	for _, line := range strings.Split(lines, "\n") {
		stamp, rest, ok := strings.Cut(line, " ")
		secs, err := strconv.ParseFloat(stamp, 64)
		if !ok || err != nil {
			continue
		}
		at := time.Unix(0, int64(secs*1e9))
		if at.Before(started.Add(-time.Second)) || at.After(started.Add(span)) {
			continue // another connection from the same port
		}
		if first.IsZero() {
			first = at
		}
		who := "out"
		if strings.Contains(rest, " In ") {
			who = macRE.FindString(rest)
			if n, ok := names[who]; ok {
				who = n
			}
		}
		flags, tcp := "?", ""
		if i := flagsRE.FindStringSubmatchIndex(rest); i != nil {
			flags, tcp = rest[i[2]:i[3]], rest[i[1]:]
		}
		item := fmt.Sprintf("+%.1f %s %s", float64(at.Sub(first).Microseconds())/1000, who, flags)
		// The TCP payload's length follows the flags (the link layer's
		// comes before them).
		if lm := lengthRE.FindStringSubmatch(tcp); lm != nil && lm[1] != "0" {
			item += " " + lm[1]
		}
		out = append(out, item)
	}
	if len(out) == 0 {
		return local + ": nothing captured"
	}
	if len(out) > 14 {
		out = append(out[:14], fmt.Sprintf("(%d more)", len(out)-14))
	}
	return local + " at " + first.Format("15:04:05.000") + ": " + strings.Join(out, "; ")
}
