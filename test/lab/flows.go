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
// An error that names no connection (the dial did not get through) gets
// the story of each SYN the host sent to remote within the span: whether
// anything answered it, and who.
func (f *Flows) Story(err, remote string, started time.Time, span time.Duration, names map[string]string) string {
	rhost, rport, rerr := net.SplitHostPort(remote)
	if rerr != nil {
		return "no connection"
	}
	m := localRE.FindStringSubmatch(err)
	if m == nil {
		return f.dialStory(rhost, rport, started, span, names)
	}
	if _, _, lerr := net.SplitHostPort(m[1]); lerr != nil {
		return "no connection"
	}
	return f.connStory(m[1], rhost, rport, started, span, names)
}

// connStory is story of the connection from local (host:port) to
// rhost:rport.
func (f *Flows) connStory(local, rhost, rport string, started time.Time, span time.Duration, names map[string]string) string {
	lhost, lport, _ := net.SplitHostPort(local)
	out, err := f.read(fmt.Sprintf("tcp and host %s and port %s and host %s and port %s", lhost, lport, rhost, rport))
	if err != nil {
		return err.Error()
	}
	return story(out, local, started, span, names)
}

// stamp is the time of tcpdump's -tt timestamp s.
func stamp(s string) (time.Time, bool) {
	secs, err := strconv.ParseFloat(s, 64)
	return time.Unix(0, int64(secs*1e9)), err == nil
}

// read is tcpdump's reading (-e -tt) of the packets filter selects.
func (f *Flows) read(filter string) (string, error) {
	out, err := exec.Command("tcpdump", "-r", f.pcap, "-n", "-e", "-tt", filter).Output()
	// A capture still being written may end in half a packet, which
	// tcpdump reports after printing the whole ones.
	if err != nil && len(out) == 0 {
		return "", fmt.Errorf("capture unreadable: %w", err)
	}
	return string(out), nil
}

// synRE finds the sender's address and port of an outgoing SYN, and its
// sequence number, in tcpdump's -e line ("... Out ... length 80:
// 198.51.100.100.55172 > 198.51.100.128.80: Flags [S], seq 3511929348,").
var synRE = regexp.MustCompile(` Out .*, length [0-9]+: ([0-9a-fA-F:.]+)\.([0-9]+) > [^ ]+: Flags \[S\], seq ([0-9]+),`)

// DialSYN returns the sequence number of the first SYN the host sent to
// remote (host:port) from started on within span, for a request whose
// error (err) names no connection: the dial that failed. Follow finds
// that SYN in other hosts' captures.
func (f *Flows) DialSYN(err, remote string, started time.Time, span time.Duration) (uint32, bool) {
	rhost, rport, rerr := net.SplitHostPort(remote)
	if rerr != nil || localRE.MatchString(err) {
		return 0, false
	}
	_, seq, ok := f.firstSYN(rhost, rport, started, span)
	return seq, ok
}

// firstSYN is the first SYN to rhost:rport within the span: its sender
// (host:port) and sequence number.
func (f *Flows) firstSYN(rhost, rport string, started time.Time, span time.Duration) (string, uint32, bool) {
	out, err := f.read(fmt.Sprintf("tcp and host %s and port %s", rhost, rport))
	if err != nil {
		return "", 0, false
	}
	for _, line := range strings.Split(out, "\n") {
		head, _, _ := strings.Cut(line, " ")
		at, ok := stamp(head)
		m := synRE.FindStringSubmatch(line)
		if !ok || m == nil || at.Before(started) || at.After(started.Add(span)) {
			continue
		}
		seq, serr := strconv.ParseUint(m[3], 10, 32)
		if serr != nil {
			continue
		}
		return net.JoinHostPort(m[1], m[2]), uint32(seq), true
	}
	return "", 0, false
}

// DialFrom is the client's address (host:port) of the dial that failed
// with err, from its first SYN to remote (host:port) within the span
// from started.
func (f *Flows) DialFrom(err, remote string, started time.Time, span time.Duration) (string, bool) {
	rhost, rport, rerr := net.SplitHostPort(remote)
	if rerr != nil || localRE.MatchString(err) {
		return "", false
	}
	local, _, ok := f.firstSYN(rhost, rport, started, span)
	return local, ok
}

// Earlier tells the connection from local (host:port) to remote that
// came before the one begun at started: a new connection on the same
// four addresses and ports meets whatever a node's conntrack still
// holds of it (docs/lab.md, the rollback's reset by a node's own stack).
func (f *Flows) Earlier(local, remote string, started time.Time, names map[string]string) string {
	lhost, lport, lerr := net.SplitHostPort(local)
	rhost, rport, rerr := net.SplitHostPort(remote)
	if lerr != nil || rerr != nil {
		return "no connection"
	}
	out, err := f.read(fmt.Sprintf("tcp and host %s and port %s and host %s and port %s", lhost, lport, rhost, rport))
	if err != nil {
		return err.Error()
	}
	// Its beginning: the last SYN the host sent on the tuple over a
	// second before this one (story keeps a second before its start).
	var began time.Time
	for _, line := range strings.Split(out, "\n") {
		head, _, _ := strings.Cut(line, " ")
		at, ok := stamp(head)
		if ok && synRE.MatchString(line) && at.Before(started.Add(-time.Second)) {
			began = at
		}
	}
	if began.IsZero() {
		return "none captured"
	}
	return story(out, local, began, started.Sub(began)-time.Second, names)
}

// dialStory tells the connection of the first SYN the host sent to
// rhost:rport from started on (a request dials once, as it starts): a
// dial that failed sent SYNs nothing, or something unexpected, answered.
func (f *Flows) dialStory(rhost, rport string, started time.Time, span time.Duration, names map[string]string) string {
	local, _, ok := f.firstSYN(rhost, rport, started, span)
	if !ok {
		return "no connection, no SYN captured"
	}
	return "no connection: " + f.connStory(local, rhost, rport, started, span, names)
}

// Follow tells where the SYN with sequence number seq, and any answer to
// it (acknowledging seq+1), passed in this capture: each packet's
// milliseconds after the first, interface, direction, addresses and
// flags. NAT rewrites addresses and ports, never sequence numbers, so a
// SYN is found on each node it crossed (the holder, the pod's node) and
// where it stopped shows. Empty when the capture holds neither.
func (f *Flows) Follow(seq uint32) string {
	// The offsets assume no IP options and no IPv6 extension headers:
	// the lab's TCP has neither.
	out, err := f.read(fmt.Sprintf("(ip and (tcp[4:4] = %d or tcp[8:4] = %d)) or (ip6 and ip6[6] = 6 and (ip6[44:4] = %d or ip6[48:4] = %d))",
		seq, seq+1, seq, seq+1))
	if err != nil {
		return err.Error()
	}
	var items []string
	var first time.Time
	for _, line := range strings.Split(out, "\n") {
		m := followRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		at, ok := stamp(m[1])
		if !ok {
			continue
		}
		if first.IsZero() {
			first = at
		}
		items = append(items, fmt.Sprintf("+%.1f %s %s %s > %s %s", float64(at.Sub(first).Microseconds())/1000, m[2], m[3], m[4], m[5], m[6]))
	}
	if len(items) == 0 {
		return ""
	}
	if len(items) > 8 {
		items = append(items[:8], fmt.Sprintf("(%d more)", len(items)-8))
	}
	return first.Format("15:04:05.000") + ": " + strings.Join(items, "; ")
}

// followRE takes tcpdump's -e -tt line apart: time, interface,
// direction, source, destination, flags.
var followRE = regexp.MustCompile(`^([0-9.]+) (\S+)\s+(In|Out|M|B|P) .*, length [0-9]+: (\S+) > (\S+): Flags \[([^\]]*)\]`)

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
		head, rest, cut := strings.Cut(line, " ")
		at, ok := stamp(head)
		if !cut || !ok {
			continue
		}
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
