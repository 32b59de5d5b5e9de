package diagnose

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/dataplane"
	"github.com/vipctl/vipctl/pkg/frr"
	"github.com/vipctl/vipctl/pkg/haproxy"
	"github.com/vipctl/vipctl/pkg/host"
	"github.com/vipctl/vipctl/pkg/manifests"
	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/pkg/runtimecfg"
	"github.com/vipctl/vipctl/pkg/sidecar"
)

// LocalOptions say which node the local part reads.
type LocalOptions struct {
	// Target is the node: the host's files and network on a real node.
	Target host.Target
	// Node is its Node name; the bundle's files go under nodes/NODE/local.
	Node string
	Now  time.Time
}

// LocalDir is where a node's own part of a bundle goes.
func LocalDir(node string) string { return "nodes/" + node + "/local" }

// nodeFiles are the node paths the local part keeps, as pkg/render,
// pkg/manifests and pkg/runtimecfg lay them down: the static config and
// node list, the rendered configs (the daemons run them: the sidecar
// writes only configs they accepted, so these are also the last good
// ones), the sidecar's last-good view of the cluster, the sysctls, the
// static pods, the node's kubeconfig (redacted), the PID files, the track
// files keepalived reads and the check scripts.
func nodeFiles(t host.Target) []string {
	files := []string{
		onnode.ClusterConfigPath, onnode.BootstrapNodesPath,
		onnode.KeepalivedConfPath, onnode.HaproxyConfPath,
		// frr.conf as the pod sees it and where it lies on the host.
		onnode.FRRConfPath, onnode.NodePath(onnode.FRRConfPath),
		onnode.LastGoodPath, onnode.SysctlPath,
		manifests.StaticPodPath(onnode.KeepalivedPodName), manifests.StaticPodPath(onnode.HaproxyPodName),
		onnode.NodeKubeconfig,
		onnode.KeepalivedPIDFile, onnode.VRRPPIDFile, onnode.CheckersPIDFile, onnode.SyncedFile,
		onnode.DrainFile,
	}
	// The track files of the IngressControllers, Local Services and
	// instances stepped down (unheard) that are on the node now, whichever
	// the config names.
	for _, pattern := range []string{onnode.IngressStatusFile("*"), onnode.LocalServiceStatusFile("*"), onnode.UnheardGlob, onnode.ScriptsDir + "/*"} {
		found, _ := filepath.Glob(t.Path(pattern))
		for _, f := range found {
			rel, err := filepath.Rel(t.Path("/"), f)
			if err == nil {
				files = append(files, "/"+filepath.ToSlash(rel))
			}
		}
	}
	return files
}

// FileRecord is one node file: whether it is there, its mode (keepalived
// refuses scripts in writable directories), size and age.
type FileRecord struct {
	Path    string    `json:"path"`
	Present bool      `json:"present"`
	Mode    string    `json:"mode,omitempty"`
	Size    int64     `json:"size,omitempty"`
	ModTime time.Time `json:"modTime,omitzero"`
	Error   string    `json:"error,omitempty"`
}

// Link is one interface and its addresses, as `ip addr` shows them.
type Link struct {
	Index     int      `json:"index"`
	Name      string   `json:"name"`
	Type      string   `json:"type"`
	State     string   `json:"state"`
	MTU       int      `json:"mtu"`
	MAC       string   `json:"mac,omitempty"`
	Addresses []string `json:"addresses"`
}

// Network is the node's interfaces and the IPv6 addresses it answers
// for as a proxy neighbour (a pool's Service addresses, pkg/dataplane).
type Network struct {
	Links    []Link   `json:"links"`
	ProxyNDP []string `json:"proxyNDP,omitempty"`
	// Namespace names the network namespace read (labs only; a node's
	// own is the host's).
	Namespace string `json:"namespace,omitempty"`
}

// Held is one VIP on the node's interfaces, by the instance carrying it.
type Held struct {
	Address  string               `json:"address"`
	Instance v1alpha1.InstanceKey `json:"instance"`
}

// Daemons is what the node's daemons say about themselves.
type Daemons struct {
	// PIDFiles are the PID files' contents: PIDs in the keepalived pod's
	// own PID namespace, not the host's.
	PIDFiles map[string]string `json:"pidFiles"`
	// Running are the daemons found running (sidecar.DaemonPIDs: haproxy
	// answers its master socket, keepalived has its PID file).
	Running map[string]int `json:"running"`
	// BGPd says whether bgpd answers; its sessions are in bgp-sessions.json.
	BGPd string `json:"bgpd,omitempty"`
}

// Local gathers one node's part of a bundle: what only the node itself
// can read. Nothing in it fails the whole: a missing file is recorded as
// missing, a daemon that does not answer as not answering. It changes
// nothing: besides questions on the daemons' sockets it asks keepalived
// for its dumps (gatherKeepalived), which keepalived writes into its own
// /tmp without any change of state.
func Local(ctx context.Context, o LocalOptions) *Archive {
	dir := LocalDir(o.Node)
	a := newArchive(dir, o.Now)
	t := o.Target

	var records []FileRecord
	for _, p := range nodeFiles(t) {
		r := FileRecord{Path: p}
		fi, err := os.Stat(t.Path(p))
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			r.Error = err.Error()
		default:
			r.Present, r.Mode, r.Size, r.ModTime = true, fi.Mode().String(), fi.Size(), fi.ModTime().UTC()
			if fi.Mode().IsRegular() {
				data, err := readBounded(t.Path(p))
				if err != nil {
					r.Error = err.Error()
				} else {
					a.add(path.Join(dir, "files", p), data)
				}
			}
		}
		records = append(records, r)
	}
	a.addJSON(path.Join(dir, "files.json"), records)

	var d Daemons
	d.PIDFiles = map[string]string{}
	for _, p := range []string{onnode.KeepalivedPIDFile, onnode.VRRPPIDFile, onnode.CheckersPIDFile} {
		if b, err := os.ReadFile(t.Path(p)); err == nil {
			d.PIDFiles[p] = strings.TrimSpace(string(b))
		}
	}
	d.Running = sidecar.DaemonPIDs(ctx, t)
	for _, q := range []struct{ sock, cmd, name string }{
		// The master CLI keeps the connection open after a command.
		{onnode.HaproxyMasterSocket, "show proc; quit", "haproxy-proc.txt"},
		{onnode.HaproxyStatsSocket, "show info", "haproxy-info.txt"},
		{onnode.HaproxyStatsSocket, "show stat", "haproxy-stat.csv"},
	} {
		if _, err := os.Stat(t.Path(q.sock)); err != nil {
			continue // no haproxy on this node (a worker), or not started
		}
		out, err := haproxy.Command(ctx, t.Path(q.sock), q.cmd, 5*time.Second, maxFile)
		if err != nil {
			a.fail(q.name, fmt.Errorf("%s on %s: %w", q.cmd, q.sock, err))
			continue
		}
		a.add(path.Join(dir, "daemons", q.name), out)
	}
	gatherKeepalived(ctx, t, a, dir)
	d.BGPd = gatherBGP(ctx, t, a, dir)
	a.addJSON(path.Join(dir, "daemons", "daemons.json"), d)

	var nw Network
	var addrs []netip.Addr
	err := t.InNetns(func() error {
		var err error
		if nw, err = readNetwork(); err != nil {
			return err
		}
		addrs, err = dataplane.LinkAddresses()
		return err
	})
	if err != nil {
		a.fail("network", err)
	} else {
		nw.Namespace = t.Netns
		a.addJSON(path.Join(dir, "network", "links.json"), nw)
		a.add(path.Join(dir, "network", "ip-addr.txt"), []byte(nw.text()))
		if held, err := heldVIPs(t, addrs); err != nil {
			a.fail("held-vips.json", err)
		} else {
			a.addJSON(path.Join(dir, "held-vips.json"), held)
		}
	}
	gatherNFTables(ctx, t, a, dir)
	return a
}

// readBounded reads at most maxFile+1 bytes (add cuts the rest).
func readBounded(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	return io.ReadAll(io.LimitReader(f, maxFile+1))
}

// heldVIPs are the addresses on the node that are VIPs of the view the
// node last synced (its last-good file), or, before its first sync, of
// its static config: the instance keys are the ones the sidecar publishes.
func heldVIPs(t host.Target, addrs []netip.Addr) ([]Held, error) {
	var c *v1alpha1.ClusterVIPs
	var st cluster.State
	lg, lgc, _, err := runtimecfg.LoadLastGood(t)
	switch {
	case err == nil:
		c, st = lgc, lg.State
	case errors.Is(err, fs.ErrNotExist):
		if c, _, err = v1alpha1.LoadStored(t.Path(onnode.ClusterConfigPath)); err != nil {
			return nil, fmt.Errorf("no last-good view and the static config: %w", err)
		}
	default:
		return nil, err
	}
	keys := cluster.Compile(c).VIPKeys(st)
	held := []Held{}
	seen := map[netip.Addr]bool{}
	for _, a := range addrs {
		a = a.Unmap()
		if key, ok := keys[a]; ok && !seen[a] {
			seen[a] = true
			held = append(held, Held{Address: a.String(), Instance: key})
		}
	}
	sort.Slice(held, func(i, j int) bool {
		return netip.MustParseAddr(held[i].Address).Less(netip.MustParseAddr(held[j].Address))
	})
	return held, nil
}

// readNetwork lists the current network namespace's links and addresses.
func readNetwork() (Network, error) {
	var n Network
	links, err := netlink.LinkList()
	if err != nil {
		return n, fmt.Errorf("listing links: %w", err)
	}
	for _, l := range links {
		attrs := l.Attrs()
		link := Link{Index: attrs.Index, Name: attrs.Name, Type: l.Type(), State: attrs.OperState.String(), MTU: attrs.MTU, Addresses: []string{}}
		if len(attrs.HardwareAddr) > 0 {
			link.MAC = attrs.HardwareAddr.String()
		}
		list, err := netlink.AddrList(l, netlink.FAMILY_ALL)
		if err != nil {
			return n, fmt.Errorf("addresses of %s: %w", attrs.Name, err)
		}
		for _, a := range list {
			link.Addresses = append(link.Addresses, a.IPNet.String())
		}
		n.Links = append(n.Links, link)
	}
	sort.Slice(n.Links, func(i, j int) bool { return n.Links[i].Index < n.Links[j].Index })
	proxies, err := netlink.NeighProxyList(0, netlink.FAMILY_V6)
	if err != nil {
		return n, fmt.Errorf("listing proxy neighbour entries: %w", err)
	}
	for _, p := range proxies {
		if p.Flags&netlink.NTF_PROXY != 0 {
			n.ProxyNDP = append(n.ProxyNDP, p.IP.String())
		}
	}
	return n, nil
}

// text is the network as `ip -brief addr` prints it.
func (n Network) text() string {
	var b strings.Builder
	for _, l := range n.Links {
		fmt.Fprintf(&b, "%d: %-16s %-8s %-8s mtu %d %s\n", l.Index, l.Name, l.Type, l.State, l.MTU, l.MAC)
		for _, a := range l.Addresses {
			fmt.Fprintf(&b, "    %s\n", a)
		}
	}
	if len(n.ProxyNDP) > 0 {
		fmt.Fprintf(&b, "proxy neighbours: %s\n", strings.Join(n.ProxyNDP, " "))
	}
	return b.String()
}

// gatherBGP adds bgpd's sessions and the routing policy it runs to a, and
// says whether it answers. Inside the keepalived pod bgpd's sockets are
// where the sidecar asks; on the host (oc debug) they are in vipctl's own
// directory.
func gatherBGP(ctx context.Context, t host.Target, a *Archive, dir string) string {
	peers, running, err := frr.ReadSessions(ctx, t)
	if !running {
		peers, running, err = frr.ReadHostSessions(ctx, t)
	}
	switch {
	case !running:
		return "not running"
	case err != nil:
		a.fail("bgp-sessions.json", err)
		return "not answering"
	}
	a.addJSON(path.Join(dir, "daemons", "bgp-sessions.json"), peers)
	// The policy in force: route-maps with their match counts and the
	// prefix-lists (per-pool policy, peer filters, backups).
	if policy, _, err := frr.ReadPolicy(ctx, t); err != nil {
		a.fail("bgp-policy.txt", err)
	} else {
		a.add(path.Join(dir, "daemons", "bgp-policy.txt"), []byte(policy))
	}
	return "answering"
}
