// Package netlab builds small networks of Linux network namespaces for the
// end-to-end tests: L2 segments (bridges living in a namespace of their
// own), hosts attached to them with an interface named like a real node's
// (br-ex), optional routers between segments, and processes started inside
// the hosts. Nothing touches the host's own namespace. Everything is
// stopped by PID and deleted when the test ends, also on failure.
//
// Tests use documentation addresses only: 198.51.100.0/24, 203.0.113.0/24
// and 2001:db8::/32.
package netlab

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vipctl/vipctl/pkg/host"
)

// Require fails the test (never skips it) when the lab cannot run: CI runs
// as root with iproute2 installed, so a missing prerequisite is a broken
// setup, not a reason to pass.
func Require(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("netlab needs root (network namespaces); run the tests as root, as CI does")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Fatal("netlab needs iproute2's ip: run hack/install-deps.sh")
	}
}

// Lab is one test's network.
type Lab struct {
	t      testing.TB
	prefix string
	// switchNS holds every segment's bridge, out of the hosts' way.
	switchNS string

	mu       sync.Mutex
	segments map[string]string // segment name -> bridge name
	hosts    map[string]*Host
	procs    []*Proc
	links    int
}

// DefaultSegment is the segment hosts join unless told otherwise.
const DefaultSegment = "a"

// New creates an empty lab with one segment, DefaultSegment.
func New(t testing.TB) *Lab {
	t.Helper()
	Require(t)
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	l := &Lab{t: t, prefix: "vl" + hex.EncodeToString(b), segments: map[string]string{}, hosts: map[string]*Host{}}
	l.switchNS = l.prefix + "-sw"
	t.Cleanup(l.cleanup)
	l.ip("netns", "add", l.switchNS)
	l.ip("-n", l.switchNS, "link", "set", "lo", "up")
	l.AddSegment(DefaultSegment)
	return l
}

// Prefix is this lab's unique prefix; every namespace it creates starts
// with it.
func (l *Lab) Prefix() string { return l.prefix }

// AddSegment adds an L2 segment (a bridge).
func (l *Lab) AddSegment(name string) {
	l.t.Helper()
	l.mu.Lock()
	br := fmt.Sprintf("br%d", len(l.segments))
	l.segments[name] = br
	l.mu.Unlock()
	l.ip("-n", l.switchNS, "link", "add", br, "type", "bridge")
	// No STP and no forwarding delay: a port works the moment it is up.
	l.ip("-n", l.switchNS, "link", "set", br, "type", "bridge", "forward_delay", "0", "stp_state", "0")
	l.ip("-n", l.switchNS, "link", "set", br, "up")
}

// HostOpts describe a host's attachment.
type HostOpts struct {
	// Iface is the host-side interface name (default "br-ex").
	Iface string
	// Addrs are CIDR addresses on Iface, e.g. "198.51.100.11/24".
	Addrs []string
	// Segment to attach to (default DefaultSegment).
	Segment string
	// Gateways are default routes via these addresses (one per family).
	Gateways []string
	// Routes are further routes, each the arguments of `ip route add`
	// ("203.0.113.32/27 via 198.51.100.12"): a node's static network
	// configuration, which Reboot applies again.
	Routes []string
	// Sysctls are further "key=value" settings of the namespace, applied
	// after the lab's own (and again by Reboot).
	Sysctls []string
}

// Host is a namespace attached to a segment.
type Host struct {
	Name  string
	NS    string
	Iface string
	lab   *Lab
	// switchPort is the veth end on the bridge, bridge its segment's
	// bridge: detaching one from the other takes the host off the network.
	switchPort string
	bridge     string
	// opts and mac are what Reboot builds the namespace from again: the
	// same attachment, and the same MAC address, as a machine's NIC keeps
	// across a reboot (peers' neighbour entries stay right).
	opts HostOpts
	mac  string
}

// AddHost creates a namespace, a veth into the segment's bridge, the
// addresses, and the sysctls a VIP holder needs (non-local bind, no IPv6
// duplicate address detection so addresses work at once).
func (l *Lab) AddHost(name string, o HostOpts) *Host {
	l.t.Helper()
	if o.Iface == "" {
		o.Iface = "br-ex"
	}
	if o.Segment == "" {
		o.Segment = DefaultSegment
	}
	l.mu.Lock()
	br, ok := l.segments[o.Segment]
	l.links++
	port := fmt.Sprintf("p%d", l.links)
	l.mu.Unlock()
	if !ok {
		l.t.Fatalf("netlab: no segment %q", o.Segment)
	}
	h := &Host{Name: name, NS: l.prefix + "-" + name, Iface: o.Iface, lab: l, switchPort: port, bridge: br, opts: o}
	l.mu.Lock()
	l.hosts[name] = h
	l.mu.Unlock()
	h.build()
	return h
}

// build creates the host's namespace and attachment from h.opts, with
// h.mac when it is set (a reboot) and a new MAC address otherwise.
func (h *Host) build() {
	l, o := h.lab, h.opts
	l.t.Helper()
	l.ip("netns", "add", h.NS)
	for _, kv := range append([]string{
		"net.ipv4.ip_nonlocal_bind=1",
		"net.ipv6.ip_nonlocal_bind=1",
		"net.ipv6.conf.all.accept_dad=0",
		"net.ipv6.conf.default.accept_dad=0",
		"net.ipv4.conf.all.arp_ignore=0",
	}, o.Sysctls...) {
		l.ip("netns", "exec", h.NS, "sysctl", "-qw", kv)
	}
	l.ip("-n", h.NS, "link", "set", "lo", "up")
	h.mac = l.plug(h.NS, o.Iface, h.bridge, h.switchPort, h.mac, o.Addrs)
	for _, gw := range o.Gateways {
		fam := "-4"
		if strings.Contains(gw, ":") {
			fam = "-6"
		}
		l.ip(fam, "-n", h.NS, "route", "add", "default", "via", gw)
	}
	for _, r := range o.Routes {
		l.ip(append([]string{"-n", h.NS, "route", "add"}, strings.Fields(r)...)...)
	}
}

// Counters are the kernel's network counters in the host's namespace,
// by nstat's names (TcpRetransSegs, Icmp6InNeighborAdvertisements, ...).
func (h *Host) Counters() (map[string]int64, error) {
	data, err := h.Exec("nstat", "-asz")
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || strings.HasPrefix(f[0], "#") {
			continue
		}
		if v, err := strconv.ParseInt(f[1], 10, 64); err == nil {
			out[f[0]] = v
		}
	}
	return out, nil
}

// MAC is the host's hardware address on Iface.
func (h *Host) MAC() string { return h.mac }

// Reboot deletes the host's namespace and builds it again as AddHost
// did: the same name, interface and MAC address, addresses, gateways,
// routes and sysctls, attached to its segment. Everything else the
// namespace held is gone, as after a machine's reboot: addresses and
// routes added since, nftables rules, conntrack and neighbour entries,
// other links. Nothing may still run in it (a process holding the old
// namespace would keep its link, and the new one could not be made).
func (h *Host) Reboot() {
	h.lab.t.Helper()
	h.lab.ip("netns", "del", h.NS)
	// The old namespace, and its links with it, goes away only once
	// nothing holds it, and asynchronously: its veth is deleted from the
	// switch's side now, so that the new one can take the port's name.
	_ = exec.Command("ip", "-n", h.lab.switchNS, "link", "del", h.switchPort).Run()
	h.build()
}

// AddRouter creates a host with one interface per segment (named eth-<segment>)
// and forwarding on, so hosts on different segments reach each other through
// it. addrs maps a segment to the router's CIDR addresses there.
func (l *Lab) AddRouter(name string, addrs map[string][]string) *Host {
	l.t.Helper()
	h := &Host{Name: name, NS: l.prefix + "-" + name, lab: l}
	l.ip("netns", "add", h.NS)
	l.mu.Lock()
	l.hosts[name] = h
	l.mu.Unlock()
	l.ip("-n", h.NS, "link", "set", "lo", "up")
	for _, kv := range []string{"net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1", "net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0"} {
		l.ip("netns", "exec", h.NS, "sysctl", "-qw", kv)
	}
	for seg, cidrs := range addrs {
		l.mu.Lock()
		br, ok := l.segments[seg]
		l.links++
		port := fmt.Sprintf("p%d", l.links)
		l.mu.Unlock()
		if !ok {
			l.t.Fatalf("netlab: no segment %q", seg)
		}
		l.plug(h.NS, "eth-"+seg, br, port, "", cidrs)
	}
	return h
}

// AddLink gives an existing host one more interface, iface, on segment
// (a VLAN of its own, say) with addrs (CIDR). The link is up; the host
// sets it down and up itself (ip link set iface down) as a NIC or VLAN
// losing carrier would.
func (l *Lab) AddLink(h *Host, segment, iface string, addrs ...string) {
	l.t.Helper()
	l.mu.Lock()
	br, ok := l.segments[segment]
	l.links++
	port := fmt.Sprintf("p%d", l.links)
	l.mu.Unlock()
	if !ok {
		l.t.Fatalf("netlab: no segment %q", segment)
	}
	l.plug(h.NS, iface, br, port, "", addrs)
}

// plug connects namespace ns to bridge br through a veth pair, iface
// inside and port on the bridge, with addrs (CIDR) on iface. The pair is
// created from ns's side directly: neither end ever exists in the
// machine's own namespace. iface gets the MAC address mac when it is
// set; plug returns iface's MAC address.
func (l *Lab) plug(ns, iface, br, port, mac string, addrs []string) string {
	l.t.Helper()
	add := []string{"-n", ns, "link", "add", iface}
	if mac != "" {
		add = append(add, "address", mac)
	}
	l.ip(append(add, "type", "veth", "peer", "name", "t"+port, "netns", l.switchNS)...)
	l.ip("-n", l.switchNS, "link", "set", "t"+port, "name", port)
	l.ip("-n", l.switchNS, "link", "set", port, "master", br, "up")
	for _, a := range addrs {
		args := []string{"-n", ns, "addr", "add", a, "dev", iface}
		if strings.Contains(a, ":") {
			args = append(args, "nodad")
		}
		l.ip(args...)
	}
	l.ip("-n", ns, "link", "set", iface, "up")
	l.waitIPv6(ns, addrs)
	if mac != "" {
		return mac
	}
	out, err := exec.Command("ip", "-n", ns, "-br", "link", "show", iface).Output()
	f := strings.Fields(string(out))
	if err != nil || len(f) < 3 {
		l.t.Fatalf("netlab: %s: reading %s's MAC address: %v %q", ns, iface, err, out)
	}
	return f[2]
}

// waitIPv6 waits until the IPv6 ones of addrs (CIDR notation) are local in
// namespace ns. The kernel makes an IPv6 address deliverable only once its
// DAD work has run on a kernel worker, even with nodad, and only after the
// link is up: on a busy machine a host that was just added could drop the
// first SYN sent to it, which a test's first connection then waited a
// second for.
func (l *Lab) waitIPv6(ns string, addrs []string) {
	l.t.Helper()
	for _, a := range addrs {
		ip, _, ok := strings.Cut(a, "/")
		if !ok || !strings.Contains(ip, ":") {
			continue
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			out, err := exec.Command("ip", "-n", ns, "-6", "route", "show", "table", "local", ip).Output()
			if err == nil && strings.HasPrefix(string(out), "local ") {
				break
			}
			if time.Now().After(deadline) {
				l.t.Fatalf("netlab: %s: %s not local after 5s: %s %v", ns, ip, out, err)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// Host returns a host by name.
func (l *Lab) Host(name string) *Host {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.hosts[name]
}

// Exec runs a command inside the host and returns its combined output.
func (h *Host) Exec(argv ...string) ([]byte, error) {
	cmd := exec.Command("ip", append([]string{"netns", "exec", h.NS}, argv...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		return out.Bytes(), fmt.Errorf("%s: %s: %w: %s", h.Name, strings.Join(argv, " "), err, strings.TrimSpace(out.String()))
	}
	return out.Bytes(), nil
}

// MustExec is Exec that fails the test on error.
func (h *Host) MustExec(argv ...string) []byte {
	h.lab.t.Helper()
	out, err := h.Exec(argv...)
	if err != nil {
		h.lab.t.Fatal(err)
	}
	return out
}

// Proc is a process started inside a host.
type Proc struct {
	Name string
	// Log is the file holding its stdout and stderr.
	Log  string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// Start runs argv inside the host in the background, output to a log file
// in the test's temp dir. The process is stopped when the test ends.
func (h *Host) Start(name string, argv ...string) *Proc {
	h.lab.t.Helper()
	log := filepath.Join(h.lab.t.TempDir(), h.Name+"-"+name+".log")
	f, err := os.Create(log)
	if err != nil {
		h.lab.t.Fatal(err)
	}
	defer func() { _ = f.Close() }() // the child holds its own descriptor
	cmd := exec.Command("ip", append([]string{"netns", "exec", h.NS}, argv...)...)
	cmd.Stdout, cmd.Stderr = f, f
	// A group of its own: Stop signals everything it forked (keepalived's
	// VRRP child, a shell's children) by PID, never by name.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		h.lab.t.Fatalf("%s: starting %s: %v", h.Name, name, err)
	}
	p := &Proc{Name: h.Name + "/" + name, Log: log, cmd: cmd, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	h.lab.mu.Lock()
	h.lab.procs = append(h.lab.procs, p)
	h.lab.mu.Unlock()
	return p
}

// PID is the process's PID (the ip netns exec wrapper execs into the
// command, so it is the command's own).
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// Signal sends sig to the process group.
func (p *Proc) Signal(sig syscall.Signal) error { return syscall.Kill(-p.PID(), sig) }

// Exited reports whether the process has ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Wait waits up to d for the process to end.
func (p *Proc) Wait(d time.Duration) error {
	select {
	case <-p.done:
		return p.err
	case <-time.After(d):
		return fmt.Errorf("%s still running after %s", p.Name, d)
	}
}

// Stop sends SIGTERM to the group, and SIGKILL if it has not ended in 5 s.
func (p *Proc) Stop() {
	if p.Exited() {
		return
	}
	_ = p.Signal(syscall.SIGTERM)
	if p.Wait(5*time.Second) != nil {
		_ = p.Signal(syscall.SIGKILL)
		_ = p.Wait(5 * time.Second)
	}
}

// LogTail returns the last n lines of the process's log.
func (p *Proc) LogTail(n int) string {
	data, _ := os.ReadFile(p.Log)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// LinkDown makes the host vanish from the network, as when a node dies:
// its switch port leaves the bridge while both ends of its link stay up,
// so the host notices nothing and nothing it sends reaches anyone (not
// even the VRRP priority-0 resignation that a downed carrier still let
// out, which made a "dead" node hand over gracefully).
func (h *Host) LinkDown() {
	h.lab.t.Helper()
	h.lab.ip("-n", h.lab.switchNS, "link", "set", h.switchPort, "nomaster")
}

// LinkUp puts the host back on its segment.
func (h *Host) LinkUp() {
	h.lab.t.Helper()
	h.lab.ip("-n", h.lab.switchNS, "link", "set", h.switchPort, "master", h.bridge)
}

// Do runs fn on an OS thread switched into the host's namespace, for Go
// code that must open sockets there. Sockets keep their namespace after
// the thread switches back.
func (h *Host) Do(fn func() error) error { return host.Target{Netns: h.NS}.InNetns(fn) }

// ApplySysctl applies a sysctl.d file inside the host, as systemd-sysctl
// reads it: "key = value" lines, # and ; comments, a key's separators
// dots, or slashes (then dots stay, as in an interface name) when the
// first one is a slash.
func (h *Host) ApplySysctl(data []byte) error {
	return h.Do(func() error {
		for _, line := range strings.Split(string(data), "\n") {
			line = strings.TrimSpace(line)
			if line == "" || line[0] == '#' || line[0] == ';' {
				continue
			}
			key, value, ok := strings.Cut(line, "=")
			if !ok {
				return fmt.Errorf("sysctl line %q: no =", line)
			}
			key = strings.TrimSpace(key)
			if i := strings.IndexAny(key, "./"); i >= 0 && key[i] == '.' {
				key = strings.ReplaceAll(key, ".", "/")
			}
			if err := os.WriteFile("/proc/sys/"+key, []byte(strings.TrimSpace(value)), 0o644); err != nil {
				return fmt.Errorf("sysctl %s: %w", key, err)
			}
		}
		return nil
	})
}

// DialContext opens a connection from inside the host, for use as an
// http.Transport's DialContext. It is needed because net/http dials on
// goroutines of its own, which do not run in the namespace Do entered.
func (h *Host) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var conn net.Conn
	err := h.Do(func() (err error) {
		var d net.Dialer
		conn, err = d.DialContext(ctx, network, addr)
		return err
	})
	return conn, err
}

// RelayTCP listens on listen inside h and relays every connection to
// target (host:port) as dialled from the caller's own namespace: a
// service of the machine's loopback (the test apiserver) reached from a
// lab namespace.
func (h *Host) RelayTCP(listen, target string) {
	h.Serve(listen, func(c net.Conn) {
		up, err := net.Dial("tcp", target)
		if err != nil {
			return
		}
		defer func() { _ = up.Close() }()
		done := make(chan struct{})
		go func() { _, _ = io.Copy(up, c); close(done) }()
		_, _ = io.Copy(c, up)
		<-done
	})
}

// Serve listens on addr inside the host and runs handle for every
// connection, on a goroutine of its own, which closes the connection when
// handle returns. It stops accepting when the test ends.
func (h *Host) Serve(addr string, handle func(net.Conn)) {
	h.lab.t.Helper()
	var l net.Listener
	if err := h.Do(func() (err error) { l, err = net.Listen("tcp", addr); return err }); err != nil {
		h.lab.t.Fatalf("netlab: %s: listening on %s: %v", h.Name, addr, err)
	}
	h.lab.t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = c.Close() }()
				handle(c)
			}()
		}
	}()
}

func (l *Lab) ip(args ...string) {
	l.t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		l.t.Fatalf("netlab: ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
}

// cleanup stops every process, then deletes every namespace (which deletes
// their links). Errors are reported, not ignored.
func (l *Lab) cleanup() {
	l.mu.Lock()
	procs := append([]*Proc{}, l.procs...)
	var nss []string
	for _, h := range l.hosts {
		nss = append(nss, h.NS)
	}
	l.mu.Unlock()
	// All at once: keepalived takes about a second to end on SIGTERM, and
	// one after the other that was seconds per lab, minutes per test run.
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Go(p.Stop)
	}
	wg.Wait()
	for _, ns := range append(nss, l.switchNS) {
		if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
			l.t.Errorf("netlab cleanup: ip netns del %s: %v: %s", ns, err, out)
		}
	}
}

// Namespaces lists the machine's namespaces starting with prefix (for
// tests of the cleanup itself).
func Namespaces(prefix string) ([]string, error) {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return nil, err
	}
	var found []string
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], prefix) {
			found = append(found, f[0])
		}
	}
	return found, nil
}
