package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/vipctl/vipctl/pkg/frr"
	"github.com/vipctl/vipctl/pkg/haproxy"
	"github.com/vipctl/vipctl/pkg/keepalived"
	"github.com/vipctl/vipctl/pkg/onnode"
)

// daemons are the keepalived and haproxy this run started, with the
// static pods' command lines (the same as on every node), and FRR's
// daemons for a routed API VIP.
type daemons struct {
	procs []*proc
	// stopFRR ends FRR's daemons and waits for them; nil when none run.
	stopFRR func()
	// exited receives an error when one of them ends on its own.
	exited chan error
}

type proc struct {
	name string
	log  string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// stopWait is how long a daemon has to end after SIGTERM before SIGKILL.
const stopWait = 5 * time.Second

// startDaemons starts haproxy, then FRR for a routed API VIP (startFRR:
// up before keepalived, so that the VIP is announced as soon as it is
// held), then keepalived (which tracks haproxy's readiness), each
// logging to DIR/<name>.log. On error the ones started are stopped
// again.
func startDaemons(dir string) (*daemons, error) {
	d := &daemons{exited: make(chan error, 3)}
	err := d.startProc(dir, haproxy.Args(dir))
	if err == nil {
		err = d.startFRR(dir)
	}
	if err == nil {
		err = d.startProc(dir, keepalived.Args(dir))
	}
	if err != nil {
		d.stop()
	}
	return d, err
}

// startProc starts the daemon of argv and has its end reported on
// d.exited.
func (d *daemons) startProc(dir string, argv []string) error {
	p, err := start(dir, argv)
	if err != nil {
		return err
	}
	d.procs = append(d.procs, p)
	go func() {
		<-p.done
		d.exited <- fmt.Errorf("%s exited (%v); its log %s ends:\n%s", p.name, p.err, p.log, tail(p.log, 15))
	}()
	return nil
}

func start(dir string, argv []string) (*proc, error) {
	name := argv[0]
	log := filepath.Join(dir, name+".log")
	f, err := os.Create(log)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }() // the child has its own descriptor
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	// A process group of its own, so a stop reaches keepalived's VRRP and
	// checker children and haproxy's workers by PID; and they die with
	// this process rather than hold the VIP on their own.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &proc{name: name, log: log, cmd: cmd, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	return p, nil
}

// startFRR runs zebra, bfdd and bgpd as the frr container does on every
// node (frr.Run) when the plan gave this host a frr.conf, for a routed API
// VIP: while keepalived holds the VIP, its connected route is announced
// to the routers the host peers with. Their log is DIR/frr.log.
func (d *daemons) startFRR(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, onnode.FRRConfPath)); errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	log := filepath.Join(dir, "frr.log")
	f, err := os.Create(log)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() { _ = f.Close() }()
		err := frr.Run(ctx, dir, f)
		if ctx.Err() == nil {
			d.exited <- fmt.Errorf("FRR exited (%v); its log %s ends:\n%s", err, log, tail(log, 15))
		}
	}()
	d.stopFRR = func() { cancel(); <-done }
	return nil
}

// stop ends keepalived first (a holder's SIGTERM sends a priority-0
// advert; a backup's sends nothing), then haproxy, then FRR (bgpd's
// NOTIFICATION has the routers withdraw whatever it still announced).
func (d *daemons) stop() {
	defer func() {
		if d.stopFRR != nil {
			d.stopFRR()
			d.stopFRR = nil
		}
	}()
	for i := len(d.procs) - 1; i >= 0; i-- {
		p := d.procs[i]
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(stopWait):
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
	}
	d.procs = nil
}

// tail is the last n lines of a log file.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
