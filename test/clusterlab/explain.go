package clusterlab

import (
	"encoding/json"
	"fmt"
	"maps"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vipctl/pkg/preflight"
	"github.com/vipctl/vipctl/pkg/status"
)

// ExplainVIPs tells, for every VIP `vipctl status` does not find held
// exactly once, what each source of truth says: the holders the nodes
// published (status), the nodes whose interface carries it, the MACs
// that answer ARP or neighbour solicitations for it on the client's
// segment (vipctl preflight, as a client asks) and whose they are, and
// every node's keepalived instance states from its log. A stale
// publication (published, on no interface, answered by one MAC) and a
// real split brain (on two interfaces, answered by two MACs) read apart.
func (c *Cluster) ExplainVIPs(t testing.TB) string {
	t.Helper()
	var b strings.Builder
	out, _ := c.Vipctl("status", "-f", c.ConfigPath, "-o", "json")
	var st status.Report
	// The report, then (exit 2) an error line.
	if err := json.NewDecoder(strings.NewReader(out[max(strings.Index(out, "{"), 0):])).Decode(&st); err != nil {
		return fmt.Sprintf("vipctl status -o json: %v\n%s", err, out)
	}
	answers := c.answers()
	macs := c.macs()
	for _, v := range st.VIPs {
		if v.State == status.StateOK {
			continue
		}
		var answered []string
		for _, m := range answers[v.Address] {
			answered = append(answered, m+" ("+orNoNode(macs[m])+")")
		}
		fmt.Fprintf(&b, "%s %s: %s, published by %v; on the interface of %v; answered by %v\n",
			v.Instance, v.Address, v.State, v.Holders, c.Holders(t, v.Address), answered)
	}
	for _, n := range c.Nodes {
		if n.Running() {
			fmt.Fprintf(&b, "%s keepalived: %s\n", n.Name, keepalivedStates(n))
		}
	}
	return b.String()
}

func orNoNode(s string) string {
	if s == "" {
		return "no node"
	}
	return s
}

// answers asks, from the client's namespace, who answers for each VIP of
// the cluster file (vipctl preflight): address -> MACs.
func (c *Cluster) answers() map[string][]string {
	argv := []string{"netns", "exec", c.Client.NS, c.Release.Vipctl, "preflight", "-f", c.ConfigPath, "--interface", c.Client.Iface, "-o", "json"}
	out, _ := exec.Command("ip", argv...).Output()
	var r preflight.Report
	m := map[string][]string{}
	if json.Unmarshal(out, &r) != nil {
		return m
	}
	for _, h := range r.Held {
		m[h.Address] = h.AnsweredBy
	}
	return m
}

// macs maps each running node's interface MAC to the node.
func (c *Cluster) macs() map[string]string {
	m := map[string]string{}
	for _, n := range c.Nodes {
		if !n.Running() {
			continue
		}
		out, err := n.Host.Exec("ip", "-j", "link", "show", "dev", n.Host.Iface)
		if err != nil {
			continue
		}
		var links []struct {
			Address string `json:"address"`
		}
		if json.Unmarshal(out, &links) == nil && len(links) == 1 {
			m[links[0].Address] = n.Name
		}
	}
	return m
}

var enteringState = regexp.MustCompile(`\((\S+)\) Entering (\w+) STATE`)

// keepalivedStates is the last state each of the node's keepalived
// instances entered, from its container logs.
func keepalivedStates(n *Node) string {
	last := map[string]string{}
	for _, line := range strings.Split(n.ContainerLogsWhere(time.Time{}, time.Now().Add(time.Hour), 1<<20, func(l string) bool { return strings.Contains(l, "Entering") }), "\n") {
		if m := enteringState.FindStringSubmatch(line); m != nil {
			stamp, _, _ := strings.Cut(line, " ")
			if at, err := time.Parse(time.RFC3339Nano, stamp); err == nil {
				stamp = at.Format("15:04:05.000")
			}
			last[m[1]] = m[2] + "@" + stamp
		}
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(last)) {
		out = append(out, k+"="+last[k])
	}
	return strings.Join(out, " ")
}
