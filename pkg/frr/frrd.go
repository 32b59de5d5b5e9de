package frr

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vipctl/vipctl/pkg/host"
	"github.com/vipctl/vipctl/pkg/onnode"
)

const (
	// frrLibDir is where Debian's frr package installs the daemons.
	frrLibDir = "/usr/lib/frr"
	// frrUser is the user FRR's daemons drop to (their compiled-in
	// default); its sockets and pid files live in FRRRunDir.
	frrUser = "frr"
	// frrStopGrace is how long the daemons get, together, to leave after
	// SIGTERM (bgpd sends its peers a NOTIFICATION, so they withdraw the
	// node's routes at once rather than after the hold time; with
	// graceful restart it closes the sessions without one, and the
	// routers keep the routes until it is back).
	frrStopGrace = 5 * time.Second
)

// Daemon is one FRR daemon a node runs for bgp pools.
type Daemon struct {
	Name string
	Argv []string
	// Ready, when set, is the file that exists once the daemon serves:
	// zebra's zserv socket, which bfdd and bgpd connect to, bfdd's and
	// bgpd's vty sockets (frr-reload.py asks every daemon whose socket
	// it finds, and fails on one that has none yet).
	Ready string
}

// Daemons are zebra, bfdd and bgpd, in start order, with every path
// under root ("" on a node): the frr container (`vipctl frr`, Run) and
// the lab start them alike. bgpd reads conf (frr.conf but its BFD
// peers, or nothing while the node announces nothing: PrepareRun), and
// gets the rest from LoadConfig; zebra reads zebraConf, bfdd nothing
// (bfdd's sessions come from bgpd). No vty TCP
// port (-P 0): vtysh and frr-reload.py use the unix sockets in FRRRunDir,
// and a host-network pod would otherwise listen on 2601 and 2605 on every
// address. Logs go to stdout, the container's log.
func Daemons(root, conf string) []Daemon {
	run := filepath.Join(root, onnode.FRRRunDir)
	zserv := filepath.Join(run, "zserv.api")
	daemon := func(name, conf string, extra ...string) []string {
		argv := []string{
			filepath.Join(frrLibDir, name),
			"-i", filepath.Join(run, name+".pid"),
			"-z", zserv,
			"--vty_socket", run,
			"-P", "0",
			"--log", "stdout",
			"-f", conf,
		}
		return append(argv, extra...)
	}
	return []Daemon{
		{Name: "zebra", Argv: daemon("zebra", filepath.Join(run, zebraConf)), Ready: zserv},
		{Name: "bfdd", Argv: daemon("bfdd", os.DevNull, "--bfdctl", filepath.Join(run, "bfdd.sock")), Ready: filepath.Join(run, "bfdd.vty")},
		{Name: "bgpd", Argv: daemon("bgpd", conf), Ready: bgpdVty(run)},
	}
}

// zebraConf is zebra's own config in FRRRunDir, written by PrepareRun:
// next-hop tracking may resolve through the default route, so that an
// eBGP multi-hop router (spec.bgp.peers[].ebgpMultihop) reached through
// the node's default route is not left unresolved (and its session
// never tried). frr.conf names the same lines when a peer is multi-hop,
// so that frr-reload.py keeps them; a node without one has them dropped
// at its first reload, and a directly connected router never needs
// them. They are applied at zebra's start because frr-reload.py (FRR
// 8.4) did not apply zebra's lines it sent in a batch file (seen in
// TestBGPMultihop), while its single commands (the removals) work.
const zebraConf = "zebra.conf"

// zebraLines are zebraConf's content.
const zebraLines = "ip nht resolve-via-default\nipv6 nht resolve-via-default\n"

// PrepareRun makes root's FRRRunDir a directory the daemons, which
// drop to user frr, can create their sockets in, clears it of the last
// run's sockets and pid files, writes zebra's config there, and returns
// the config bgpd starts from: a copy of frr.conf for user frr without
// its BFD peers (startCopy) when the sidecar has written one, else
// nothing (os.DevNull).
func PrepareRun(root string) (conf string, err error) {
	run := filepath.Join(root, onnode.FRRRunDir)
	if err := os.MkdirAll(run, 0o755); err != nil {
		return "", err
	}
	u, err := user.Lookup(frrUser)
	if err != nil {
		return "", fmt.Errorf("FRR's user: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	// The frr container's root has no CAP_DAC_OVERRIDE: it writes into
	// the directory while it owns it (CAP_CHOWN), then hands it to user
	// frr. A container restart finds it frr's from the last start.
	if err := os.Chown(run, 0, 0); err != nil {
		return "", err
	}
	// A socket must tell a daemon that serves (Daemon.Ready), not one
	// of the last run: bfdd and bgpd that took zebra's old socket for
	// the new one failed to connect and tried again seconds later.
	if err := removeStale(run); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(run, zebraConf), []byte(zebraLines), 0o644); err != nil {
		return "", err
	}
	conf = filepath.Join(root, onnode.FRRConfPath)
	if _, err := os.Stat(conf); errors.Is(err, os.ErrNotExist) {
		// The node announces nothing yet (spec.bgp but no bgp pool, or
		// the init container found no bootstrap state): bgpd starts
		// empty and the sidecar's reload gives it frr.conf once there is
		// one.
		conf = os.DevNull
	} else if err != nil {
		return "", err
	} else if conf, err = startCopy(conf, run, uid, gid); err != nil {
		return "", err
	}
	if err := os.Chown(run, uid, gid); err != nil {
		return "", err
	}
	return conf, nil
}

// removeStale removes the sockets and pid files the daemons of the last
// run left in run.
func removeStale(run string) error {
	entries, err := os.ReadDir(run)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Type()&fs.ModeSocket != 0 || strings.HasSuffix(e.Name(), ".pid") {
			if err := os.Remove(filepath.Join(run, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
	}
	return nil
}

// startConf is the copy of frr.conf bgpd starts from, in FRRRunDir.
const startConf = "frr.conf.start"

// startCopy copies frr.conf to FRRRunDir for user frr alone and returns
// the copy's path. bgpd reads its config after dropping to user frr, and
// a frr.conf with a BGP password in it is root's alone (mode 0600); the
// frr container mounts the directory that holds it read-only, so the
// file itself cannot be handed over. frr-reload.py (root) reads frr.conf
// itself on every change.
//
// The copy leaves out the peers' BFD (withoutBFD): bgpd reads its file
// before it reaches zebra, and FRR 8.4's bgpd registers a BFD peer then
// and never again once that failed (lib/bfd.c, mended in FRR 10.3 by
// "lib: Fix session re-establishment", 2c6fcbdf84): after every restart
// of a node's FRR its BFD sessions stayed down, and a dead node was
// found by the hold timer alone. LoadConfig adds the lines once bgpd is
// zebra's client. Everything else is in the file, so that the node's
// routes go out before its End-of-RIB (a router helping a graceful
// restart drops the stale routes at the End-of-RIB: a bgpd started empty
// and loaded after its sessions came up lost them for a moment).
func startCopy(conf, run string, uid, gid int) (string, error) {
	data, err := os.ReadFile(conf)
	if err != nil {
		return "", err
	}
	data = withoutBFD(data)
	dst := filepath.Join(run, startConf)
	tmp := dst + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return "", err
	}
	if err := os.Chown(tmp, uid, gid); err != nil {
		_ = os.Remove(tmp)
		return "", err
	}
	if err := os.Rename(tmp, dst); err != nil {
		_ = os.Remove(tmp)
		return "", err
	}
	return dst, nil
}

// withoutBFD is frr.conf without its `neighbor X bfd` lines.
func withoutBFD(conf []byte) []byte {
	lines := strings.SplitAfter(string(conf), "\n")
	out := lines[:0]
	for _, l := range lines {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "neighbor" && f[2] == "bfd" {
			continue
		}
		out = append(out, l)
	}
	return []byte(strings.Join(out, ""))
}

// LoadConfig brings the bgpd just started in line with root's frr.conf
// through Reload (which first waits for bgpd to be zebra's client):
// the BFD peers its start copy left out, and nothing while there is no
// frr.conf (the sidecar's reload gives it one then). A load that fails
// is tried again, twice, half a second apart: frr-reload.py compares
// with what bgpd runs, so a retry sends only what did not take.
func LoadConfig(ctx context.Context, t host.Target) error {
	if _, err := os.Stat(t.Path(onnode.FRRConfPath)); errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	var err error
	for try := 0; try < 3; try++ {
		if try > 0 {
			select {
			case <-ctx.Done():
				return errors.Join(err, ctx.Err())
			case <-time.After(500 * time.Millisecond):
			}
		}
		if _, err = Reload(ctx, t); err == nil {
			return nil
		}
	}
	return err
}

// Run runs zebra, bfdd and bgpd in the foreground until ctx ends or one
// of them exits: the frr container's main process. A daemon that dies
// takes the others down and Run returns its error, so the kubelet
// restarts the container and bgpd comes back with frr.conf; peers see the
// session drop and withdraw the node's routes meanwhile, which is the
// truth.
func Run(ctx context.Context, root string, out io.Writer) error {
	conf, err := PrepareRun(root)
	if err != nil {
		return err
	}
	var procs []*proc
	exited := make(chan *proc, 3)
	stop := func() { stopAll(procs, frrStopGrace, out) }
	for _, d := range Daemons(root, conf) {
		cmd := exec.Command(d.Argv[0], d.Argv[1:]...)
		cmd.Stdout, cmd.Stderr = out, out
		// Should vipctl frr itself be killed, its daemons go with it: a
		// restarted container must not find an old bgpd on port 179.
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			stop()
			return fmt.Errorf("starting %s: %w", d.Name, err)
		}
		p := &proc{name: d.Name, cmd: cmd, done: make(chan struct{})}
		procs = append(procs, p)
		go func() { p.err = cmd.Wait(); close(p.done); exited <- p }()
		if d.Ready == "" {
			continue
		}
		if err := waitReady(ctx, d.Ready, p.done); err != nil {
			stop()
			return fmt.Errorf("%s: %w", d.Name, err)
		}
	}
	// The rest of frr.conf goes in while the daemons are watched: one
	// that dies meanwhile ends the load too. The container's root file
	// system is read-only; /var/tmp is its scratch space (frr-reload.py's
	// files).
	loadCtx, cancelLoad := context.WithCancel(ctx)
	defer cancelLoad()
	loaded := make(chan error, 1)
	go func() { loaded <- LoadConfig(loadCtx, host.Target{Root: root, TempDir: "/var/tmp"}) }()
	for {
		select {
		case <-ctx.Done():
			stop()
			return nil
		case p := <-exited:
			cancelLoad()
			stop()
			return fmt.Errorf("%s exited (%v): stopping FRR", p.name, p.err)
		case err := <-loaded:
			if err != nil {
				stop()
				return fmt.Errorf("loading frr.conf: %w", err)
			}
			loaded = nil // loaded: only the daemons are watched now
		}
	}
}

// proc is one daemon Run started; done closes once it is reaped.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// stopAll ends the daemons in the reverse of their start order, each
// gone before the next is told: bgpd closes its sessions while bfdd
// still runs, so a router helping a graceful restart sees the session
// end (and keeps the routes) before BFD could say the node is down.
// Together they get grace; those left then are killed. A daemon that
// cannot be signalled is said and left to the container's end. The
// grace's end is a context's, which every daemon after the first late one reads
// too: a one-shot timer's value, taken by that first one, left the next
// waiting for good on a daemon that did not leave on SIGTERM, until the
// kubelet killed the container 30 s later (every keepalived pod replaced
// in place, the cluster lab's rollback, 2026-11-30).
func stopAll(procs []*proc, grace time.Duration, out io.Writer) {
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	for i := len(procs) - 1; i >= 0; i-- {
		p := procs[i]
		began := time.Now()
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
			// The daemons run as user frr: without CAP_KILL root may not
			// signal them (EPERM), and waiting would be for nothing.
			_, _ = fmt.Fprintf(out, "vipctl frr: cannot stop %s: %v\n", p.name, err)
			continue
		}
		select {
		case <-p.done:
		case <-ctx.Done():
			if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
				_, _ = fmt.Fprintf(out, "vipctl frr: cannot kill %s: %v\n", p.name, err)
				continue
			}
			<-p.done
			_, _ = fmt.Fprintf(out, "vipctl frr: %s did not stop within %s of SIGTERM: killed\n", p.name, time.Since(began).Round(time.Millisecond))
		}
	}
}

// waitReady waits for path to appear while the daemon runs.
func waitReady(ctx context.Context, path string, done <-chan struct{}) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	timeout := time.After(30 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("exited before %s appeared", path)
		case <-ctx.Done():
			return ctx.Err()
		case <-timeout:
			return fmt.Errorf("no %s after 30s", path)
		case <-tick.C:
		}
	}
}
