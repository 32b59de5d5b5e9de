package cluster

import (
	"bufio"
	"fmt"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vipctl/vipctl/test/clusterlab"
)

// nodeLine is one line `nft monitor` printed, with when it was read.
type nodeLine struct {
	at   time.Time
	text string
}

// nodeWatch records every change of each node's nftables ruleset (kube-
// proxy's tables, vipctl's own) through an in-place roll, timed as read:
// a request refused by a node's own stack (the rollback's rare reset,
// docs/lab.md) is then matched with what changed in its rules around it.
type nodeWatch struct {
	mu    sync.Mutex
	lines map[string][]nodeLine
	// ended says, per node, when and why its monitor ended before stop:
	// its record ends there. nft 1.0.6 aborts on decoding the handover
	// rules vipctl wrote before 2026-12-01: until then every monitor
	// ended at its start and every roll counted 0; in a rollback to such
	// a release each node's monitor ends once its previous-release
	// sidecar writes them.
	ended    map[string]string
	stopping bool
	cmds     []*exec.Cmd
	done     sync.WaitGroup
}

// watchNftables starts `nft monitor` in every node's network namespace;
// stop ends them (by PID), also when the test ends.
func watchNftables(t *testing.T, c *clusterlab.Cluster) *nodeWatch {
	return watchNodes(t, c, "nft", "monitor")
}

// watchConntrack records every event of each node's IPv4 TCP connections
// to port 80 (`conntrack -E`: new, update and destroy, one line each with
// the entry's state and its original and reply tuples): a SYN that kube-
// proxy's DNAT took shows a new entry with a reply from the endpoint, one
// it did not a reply from the address asked, and a SYN that matched an
// older entry no new one, but that entry's own events (tuple). The
// rollback's reset by a node's own stack, with no rule changed around it
// (docs/lab.md), is the question this answers.
func watchConntrack(t *testing.T, c *clusterlab.Cluster) *nodeWatch {
	return watchNodes(t, c, "conntrack", "-E", "-p", "tcp", "--dport", "80")
}

// watchNodes runs argv in every node's network namespace and records its
// output lines, timed as read; stop ends them (by PID), also when the
// test ends.
func watchNodes(t *testing.T, c *clusterlab.Cluster, argv ...string) *nodeWatch {
	w := &nodeWatch{lines: map[string][]nodeLine{}, ended: map[string]string{}}
	for _, n := range c.Nodes {
		// Line-buffered: into a pipe the output would wait for 4 KiB,
		// and the command ends killed (2026-12-01: a roll recorded no
		// line at all without it).
		cmd := exec.Command("ip", append([]string{"netns", "exec", n.Host.NS, "stdbuf", "-oL"}, argv...)...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Logf("%s: %s: %v (no record)", n.Name, strings.Join(argv, " "), err)
			continue
		}
		w.cmds = append(w.cmds, cmd)
		name := n.Name
		w.lines[name] = nil // counted, also with no change
		w.done.Add(1)
		go func() {
			defer w.done.Done()
			sc := bufio.NewScanner(out)
			sc.Buffer(make([]byte, 64*1024), 1024*1024)
			for sc.Scan() {
				l := nodeLine{time.Now(), sc.Text()}
				w.mu.Lock()
				w.lines[name] = append(w.lines[name], l)
				w.mu.Unlock()
			}
			err := cmd.Wait()
			w.mu.Lock()
			defer w.mu.Unlock()
			if !w.stopping {
				w.ended[name] = fmt.Sprintf("at %s, %v: %s", time.Now().Format("15:04:05.000"), err, strings.TrimSpace(stderr.String()))
			}
		}()
	}
	t.Cleanup(w.stop)
	return w
}

// stop ends every monitor and waits for their output.
func (w *nodeWatch) stop() {
	w.mu.Lock()
	w.stopping = true
	w.mu.Unlock()
	for _, cmd := range w.cmds {
		if cmd.Process != nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	}
	w.done.Wait()
	w.cmds = nil
}

// counts says how many changes each node's monitor saw.
func (w *nodeWatch) counts() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, name := range slices.Sorted(maps.Keys(w.lines)) {
		if why, ok := w.ended[name]; ok {
			out = append(out, fmt.Sprintf("%s %d until its record ended %s", name, len(w.lines[name]), why))
			continue
		}
		out = append(out, fmt.Sprintf("%s %d", name, len(w.lines[name])))
	}
	return strings.Join(out, ", ")
}

// around lists, per node, the changes read from before to after each
// failure and those naming one of addrs within a minute of one, at most
// limit lines per node.
func (w *nodeWatch) around(failed []time.Time, before, after time.Duration, addrs []string, limit int) string {
	return w.collect(failed, before, after, addrs, limit, false)
}

// naming lists, per node, the lines read from before to after each
// failure that name one of addrs, at most limit per node.
func (w *nodeWatch) naming(failed []time.Time, before, after time.Duration, addrs []string, limit int) string {
	return w.collect(failed, before, after, addrs, limit, true)
}

// tuple lists, per node, every line of the record that names one of
// the connections (conntrack's words for it: "dst=198.51.100.144
// sport=60704 dport=80 "), at most limit per node: what the node's
// conntrack did with each connection that used those addresses and ports.
func (w *nodeWatch) tuple(terms []string, limit int) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, name := range slices.Sorted(maps.Keys(w.lines)) {
		var kept []string
		for _, l := range w.lines[name] {
			if slices.ContainsFunc(terms, func(term string) bool { return strings.Contains(l.text, term) }) {
				kept = append(kept, l.at.Format("15:04:05.000")+" "+l.text)
			}
		}
		if len(kept) > limit {
			kept = append(kept[:limit], fmt.Sprintf("… %d more", len(kept)-limit))
		}
		if len(kept) > 0 {
			out = append(out, name+":\n  "+strings.Join(kept, "\n  "))
		}
	}
	if len(out) == 0 {
		return "no node recorded an event of them"
	}
	return strings.Join(out, "\n")
}

// collect is around (onlyNaming false) and naming (true).
func (w *nodeWatch) collect(failed []time.Time, before, after time.Duration, addrs []string, limit int, onlyNaming bool) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	near := func(at time.Time, lo, hi time.Duration) bool {
		for _, f := range failed {
			if !at.Before(f.Add(-lo)) && !at.After(f.Add(hi)) {
				return true
			}
		}
		return false
	}
	var out []string
	for name, lines := range w.lines {
		var kept []string
		for _, l := range lines {
			names := slices.ContainsFunc(addrs, func(a string) bool { return strings.Contains(l.text, a) })
			keep := near(l.at, before, after) || (names && near(l.at, time.Minute, time.Minute))
			if onlyNaming {
				keep = names && near(l.at, before, after)
			}
			if keep {
				kept = append(kept, l.at.Format("15:04:05.000")+" "+l.text)
			}
		}
		if len(kept) > limit {
			kept = append(kept[:limit], fmt.Sprintf("… %d more", len(kept)-limit))
		}
		if len(kept) > 0 {
			out = append(out, name+":\n  "+strings.Join(kept, "\n  "))
		}
	}
	slices.Sort(out)
	if len(out) == 0 {
		out = append(out, "no node recorded a line around the failures")
	}
	for _, name := range slices.Sorted(maps.Keys(w.ended)) {
		out = append(out, name+"'s record ended "+w.ended[name])
	}
	return strings.Join(out, "\n")
}
