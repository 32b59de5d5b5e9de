package lab

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/vipctl/vipctl/test/lab/probe"
	"github.com/vipctl/vipctl/test/netlab"
)

// BuildProbe builds labprobe (test/lab/probe) into a directory of
// t's, removed when t ends, for StartEchoProcess and StartPollProcess.
// A binary of its own rather than the test binary run again: it starts
// in milliseconds with a few MiB, where the test binary would
// initialise every package the tests link (client-go, the apiserver's
// test harness) in each process.
func BuildProbe(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "labprobe")
	if err := GoBuild(bin, "github.com/vipctl/vipctl/test/lab/probe/labprobe"); err != nil {
		t.Fatal(err)
	}
	return bin
}

// GoBuild builds the command pkg of this module into bin; the error
// carries go build's output.
func GoBuild(bin, pkg string) error {
	if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
	}
	return nil
}

// BuildVipctl builds vipctl from this tree into a directory of t's,
// removed when t ends: what a test runs as a user would, on PATH or in a
// namespace.
func BuildVipctl(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "vipctl")
	if err := GoBuild(bin, "github.com/vipctl/vipctl/cmd/vipctl"); err != nil {
		t.Fatal(err)
	}
	return bin
}

// ProbeProc is a labprobe process in a namespace, and the file it
// records in.
type ProbeProc struct {
	*netlab.Proc
	Out string
}

// startProbe starts bin's mode in h with args, and the record file made
// beforehand, so that reading it before the process has opened it finds
// it empty.
func startProbe(t testing.TB, bin string, h *netlab.Host, mode string, args ...string) *ProbeProc {
	t.Helper()
	p := &ProbeProc{Out: filepath.Join(t.TempDir(), h.Name+"-"+mode+".jsonl")}
	if err := os.WriteFile(p.Out, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	p.Proc = h.Start(mode, append([]string{bin, mode, "-out", p.Out}, args...)...)
	return p
}

// Records is what the process has recorded so far (all of it once
// stopped).
func (p *ProbeProc) Records(t testing.TB) []probe.Record {
	t.Helper()
	r, err := probe.Read(p.Out)
	if err != nil {
		t.Fatalf("%s: %v\n%s", p.Name, err, p.LogTail(10))
	}
	return r
}

// Stop ends the process (SIGTERM: it finishes the requests in flight
// and writes them) and returns every record. A process that did not end
// cleanly fails t: its records may be incomplete.
func (p *ProbeProc) Stop(t testing.TB) []probe.Record {
	t.Helper()
	p.Proc.Stop()
	if err := p.Wait(time.Second); err != nil {
		t.Errorf("%s: %v\n%s", p.Name, err, p.LogTail(10))
	}
	return p.Records(t)
}

// StartEchoProcess serves HTTP on addr inside h from a labprobe process
// (bin, from BuildProbe), answering body: StartEcho outside the test
// process. It returns once the process listens; it is stopped when the
// lab ends.
func StartEchoProcess(t testing.TB, bin string, h *netlab.Host, addr, body string) *ProbeProc {
	t.Helper()
	p := startProbe(t, bin, h, "echo", "-listen", addr, "-body", body)
	WaitFor(t, 10*time.Second, p.Name+" listening", func() bool {
		if p.Exited() {
			t.Fatalf("%s ended:\n%s", p.Name, p.LogTail(10))
		}
		return slices.ContainsFunc(p.Records(t), func(r probe.Record) bool { return r.Kind == probe.KindListening })
	})
	return p
}

// StartPollProcess polls each of urls from inside h in a labprobe
// process (bin, from BuildProbe) with Probe's semantics: a new
// connection every interval, PollTimeout for its answer, no waiting for
// earlier requests. Every request is recorded, with whether its TCP
// handshake completed.
func StartPollProcess(t testing.TB, bin string, h *netlab.Host, urls []string, interval time.Duration) *ProbeProc {
	t.Helper()
	args := []string{"-interval", interval.String(), "-timeout", PollTimeout.String()}
	return startProbe(t, bin, h, "poll", append(args, urls...)...)
}
