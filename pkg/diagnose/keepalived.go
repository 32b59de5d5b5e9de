package diagnose

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vipctl/vipctl/pkg/host"
	"github.com/vipctl/vipctl/pkg/keepalived"
	"github.com/vipctl/vipctl/pkg/onnode"
)

// keepalived's own account of its VRRP instances. Asked by a signal,
// keepalived writes what it holds in memory into a file in its /tmp
// (keepalived(8), keepalived.conf(5)): on SIGUSR1 its data (the state,
// priorities, tracked scripts and files, VIPs and last transition of
// every instance), on SIGUSR2 its statistics, and, built with JSON
// support, on a real-time signal its instances as JSON. None changes any
// state: keepalived logs "Printing VRRP data for process(N) on signal" and
// carries on.

// keepalivedDumpWait bounds the wait for keepalived to write its files:
// it writes them at once (milliseconds); a keepalived that cannot (no
// writable /tmp) never will.
const keepalivedDumpWait = 2 * time.Second

// The files keepalived writes, under these names in its /tmp and in the
// bundle.
const (
	keepalivedData  = "keepalived.data"
	keepalivedStats = "keepalived.stats"
	keepalivedJSON  = "keepalived.json"
	// keepalivedInstances summarises keepalivedJSON.
	keepalivedInstances = "keepalived-instances.json"
)

// keepalivedDump is one file keepalived writes and the signal asking for it.
type keepalivedDump struct {
	file string
	sig  syscall.Signal
}

// KeepalivedInstance is one VRRP instance as keepalived's JSON dump tells
// it.
type KeepalivedInstance struct {
	Name string `json:"name"`
	// State is MASTER, BACKUP, FAULT or INIT.
	State     string `json:"state"`
	VRID      int    `json:"vrid"`
	Interface string `json:"interface"`
	// Priority is the configured one; EffectivePriority is after the
	// tracked scripts' and files' weights (a drain lowers it).
	Priority          int       `json:"priority"`
	EffectivePriority int       `json:"effectivePriority"`
	VIPs              []string  `json:"vips"`
	LastTransition    time.Time `json:"lastTransition,omitzero"`
}

// gatherKeepalived asks the node's keepalived for its dumps and adds them
// under dir/daemons, with a summary of the instances. A keepalived that
// is not running or does not write a file in time is a problem recorded,
// not a failure.
func gatherKeepalived(ctx context.Context, t host.Target, a *Archive, dir string) {
	podPID, err := keepalived.PID(t)
	if err != nil {
		a.fail("keepalived", err)
		return
	}
	pid, err := keepalivedProcess(t, podPID)
	if err != nil {
		a.fail("keepalived", err)
		return
	}
	// DATA and STATS are SIGUSR1 and SIGUSR2 in every build (keepalived(8));
	// the JSON signal's number is the C library's SIGRTMIN+2.
	dumps := []keepalivedDump{{keepalivedData, syscall.SIGUSR1}, {keepalivedStats, syscall.SIGUSR2}}
	if sig, err := keepalivedSignum(ctx, t, "JSON"); err != nil {
		a.fail(keepalivedJSON, err)
	} else {
		dumps = append(dumps, keepalivedDump{keepalivedJSON, sig})
	}
	tmp := keepalivedTmp(t, pid)
	before := map[string]fileStamp{}
	var sent []keepalivedDump
	for _, d := range dumps {
		before[d.file] = stampOf(filepath.Join(tmp, d.file))
		if err := signalDump(pid, d.sig); err != nil {
			a.fail(d.file, err)
			continue
		}
		sent = append(sent, d)
	}
	got := waitDumps(ctx, tmp, sent, before)
	for _, d := range sent {
		b, ok := got[d.file]
		if !ok {
			a.fail(d.file, fmt.Errorf("keepalived (PID %d) did not write %s within %s of signal %d (its /tmp must be writable)", pid, filepath.Join(tmp, d.file), keepalivedDumpWait, d.sig))
			continue
		}
		a.add(path.Join(dir, "daemons", d.file), b)
	}
	if b, ok := got[keepalivedJSON]; ok {
		if in, err := parseKeepalivedJSON(b); err != nil {
			a.fail(keepalivedInstances, fmt.Errorf("%s: %w", keepalivedJSON, err))
		} else {
			a.addJSON(path.Join(dir, "daemons", keepalivedInstances), in)
		}
	}
}

// keepalivedProcess finds the keepalived parent whose PID file says
// podPID. That PID is one of the keepalived pod's PID namespace: ours
// inside the pod, not on the host (oc debug node), where other
// keepalived may run (OpenShift's own) and PIDs are the host's. So the
// process is the one keepalived whose command line names vipctl's PID
// file and whose PID in its own namespace (the last of NSpid in
// /proc/PID/status) is podPID; a signal goes nowhere else.
func keepalivedProcess(t host.Target, podPID int) (int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	pidFiles := []string{onnode.KeepalivedPIDFile, t.Path(onnode.KeepalivedPIDFile)}
	var found []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue // gone meanwhile
		}
		args := strings.Split(string(cmdline), "\x00")
		if path.Base(args[0]) != "keepalived" || !slices.ContainsFunc(args, func(a string) bool { return slices.Contains(pidFiles, a) }) {
			continue
		}
		if st, err := procStatus(pid); err == nil && st.innerPID() == podPID {
			found = append(found, pid)
		}
	}
	switch len(found) {
	case 0:
		return 0, fmt.Errorf("keepalived, PID %d in its pod (%s), is not among the processes here: not running, or diagnose runs outside the host's PID namespace (oc debug node shares it)", podPID, onnode.KeepalivedPIDFile)
	case 1:
		return found[0], nil
	}
	return 0, fmt.Errorf("several keepalived are PID %d in their PID namespaces (PIDs %v here): signalling none", podPID, found)
}

// procStatusFields are /proc/PID/status's lines by field name.
type procStatusFields map[string]string

func procStatus(pid int) (procStatusFields, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	st := procStatusFields{}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			st[k] = strings.TrimSpace(v)
		}
	}
	return st, nil
}

// innerPID is the process's PID in its own PID namespace; 0 if unknown.
func (st procStatusFields) innerPID() int {
	f := strings.Fields(st["NSpid"])
	if len(f) == 0 {
		f = strings.Fields(st["Pid"]) // before Linux 4.1: no NSpid
	}
	if len(f) == 0 {
		return 0
	}
	pid, _ := strconv.Atoi(f[len(f)-1])
	return pid
}

// takes says whether the process handles sig: keepalived blocks the
// signals it reads from its signalfd (SigBlk); a handler shows in SigCgt.
func (st procStatusFields) takes(sig syscall.Signal) bool {
	for _, k := range []string{"SigBlk", "SigCgt"} {
		mask, err := strconv.ParseUint(st[k], 16, 64)
		if err == nil && sig >= 1 && sig <= 64 && mask&(1<<(sig-1)) != 0 {
			return true
		}
	}
	return false
}

// signalDump sends sig to keepalived's parent, which hands it on to its
// VRRP process. Only a signal keepalived takes: any other would end it (a
// real-time signal's default action), so a JSON number from a keepalived
// built otherwise than the one running is never sent. (It cannot be
// another of keepalived's functions either: JSON is SIGRTMIN+2, SIGRTMIN
// 34 or 35 by C library; STATS_CLEAR and TDUMP are SIGRTMAX-1 and SIGRTMAX.)
func signalDump(pid int, sig syscall.Signal) error {
	st, err := procStatus(pid)
	if err != nil {
		return fmt.Errorf("keepalived (PID %d): %w", pid, err)
	}
	if !st.takes(sig) {
		return fmt.Errorf("keepalived (PID %d) does not take signal %d: not asking it", pid, sig)
	}
	if err := syscall.Kill(pid, sig); err != nil {
		return fmt.Errorf("signal %d to keepalived (PID %d): %w", sig, pid, err)
	}
	return nil
}

// keepalivedSignum asks keepalived for the number of a signal function
// (--signum): the JSON one is real-time, numbered by the C library.
// keepalived here is the one of vipctl's image, as in the pod.
func keepalivedSignum(ctx context.Context, t host.Target, fn string) (syscall.Signal, error) {
	bin := t.Keepalived
	if bin == "" {
		bin = "keepalived"
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--signum="+fn).CombinedOutput()
	n, perr := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil || perr != nil || n < 1 || n > 64 {
		return 0, fmt.Errorf("keepalived --signum=%s: %v %q (built without JSON support?)", fn, err, strings.TrimSpace(string(out)))
	}
	return syscall.Signal(n), nil
}

// keepalivedTmp is keepalived's /tmp as diagnose can reach it: keepalived
// writes into $TMPDIR (the lab gives each node one) or /tmp, which for a
// container is its own, reached through /proc/PID/root from the host.
// The sidecar's container may not look into keepalived's root (keepalived
// holds CAP_SYS_NICE, which the sidecar lacks); there it is the pod's /tmp,
// which both containers mount.
func keepalivedTmp(t host.Target, pid int) string {
	dir := "/tmp"
	if env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid)); err == nil {
		for _, kv := range strings.Split(string(env), "\x00") {
			if v, ok := strings.CutPrefix(kv, "TMPDIR="); ok && path.IsAbs(v) {
				dir = v
			}
		}
	}
	root := fmt.Sprintf("/proc/%d/root", pid)
	if _, err := os.Stat(root + "/"); err == nil {
		return root + dir
	}
	return t.Path(dir)
}

// fileStamp tells whether a file was rewritten.
type fileStamp struct {
	modNanos, size int64
	present        bool
}

func stampOf(p string) fileStamp {
	fi, err := os.Stat(p)
	if err != nil {
		return fileStamp{}
	}
	return fileStamp{modNanos: fi.ModTime().UnixNano(), size: fi.Size(), present: true}
}

// waitDumps waits, at most keepalivedDumpWait, for each of the files to
// be rewritten after its signal and returns those that were. A file
// counts once it differs from before the signal and then holds still for
// one poll (keepalived writes it in a few writes); JSON once it parses.
func waitDumps(ctx context.Context, tmp string, dumps []keepalivedDump, before map[string]fileStamp) map[string][]byte {
	last := map[string]fileStamp{}
	got := map[string][]byte{}
	deadline := time.Now().Add(keepalivedDumpWait)
	for len(got) < len(dumps) && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return got
		case <-time.After(20 * time.Millisecond):
		}
		for _, d := range dumps {
			p := filepath.Join(tmp, d.file)
			st := stampOf(p)
			if _, done := got[d.file]; !done && st.present && st != before[d.file] && st == last[d.file] {
				if b, err := readBounded(p); err == nil && (d.file != keepalivedJSON || json.Valid(b)) {
					got[d.file] = b
				}
			}
			last[d.file] = st
		}
	}
	return got
}

// parseKeepalivedJSON summarises keepalived's JSON dump: the fields
// keepalived 2.x writes for each instance under "data".
func parseKeepalivedJSON(b []byte) ([]KeepalivedInstance, error) {
	var dump []struct {
		Data struct {
			Name              string   `json:"iname"`
			State             *int     `json:"state"`
			VRID              int      `json:"vrid"`
			Interface         string   `json:"ifp_ifname"`
			BasePriority      int      `json:"base_priority"`
			EffectivePriority int      `json:"effective_priority"`
			VIPs              []string `json:"vips"`
			LastTransition    float64  `json:"last_transition"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &dump); err != nil {
		return nil, err
	}
	out := make([]KeepalivedInstance, 0, len(dump))
	for i, d := range dump {
		if d.Data.Name == "" || d.Data.State == nil {
			return nil, fmt.Errorf("instance %d has no iname or state: not the format of keepalived 2.x", i)
		}
		in := KeepalivedInstance{Name: d.Data.Name, State: vrrpState(*d.Data.State), VRID: d.Data.VRID, Interface: d.Data.Interface,
			Priority: d.Data.BasePriority, EffectivePriority: d.Data.EffectivePriority, VIPs: []string{}}
		// "198.51.100.5 dev br-ex scope global set": the address.
		for _, v := range d.Data.VIPs {
			if f := strings.Fields(v); len(f) > 0 {
				in.VIPs = append(in.VIPs, f[0])
			}
		}
		if d.Data.LastTransition > 0 {
			sec, frac := math.Modf(d.Data.LastTransition)
			in.LastTransition = time.Unix(int64(sec), int64(frac*1e9)).UTC().Truncate(time.Microsecond)
		}
		out = append(out, in)
	}
	slices.SortFunc(out, func(x, y KeepalivedInstance) int { return strings.Compare(x.Name, y.Name) })
	return out, nil
}

// vrrpState names keepalived's VRRP_STATE_* numbers (vrrp.h).
func vrrpState(n int) string {
	switch n {
	case 0:
		return "INIT"
	case 1:
		return "BACKUP"
	case 2:
		return "MASTER"
	case 3:
		return "FAULT"
	}
	return strconv.Itoa(n)
}
