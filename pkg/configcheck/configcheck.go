// Package configcheck lets the real daemons judge rendered configuration:
// `keepalived --config-test` and `vtysh -C` here, and the runner the
// daemons' own packages judge with (pkg/haproxy's `haproxy -c`): a private
// copy of the file (WithFile), the binary run in the node's namespace
// (Options.Run), and its answer bounded and redacted (Diagnose); a
// success message is not passed on. The sidecar judges before every swap,
// the tests every rendered file.
package configcheck

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/vipctl/vipctl/pkg/redact"
)

// Options say where the daemons run.
type Options struct {
	// Netns, when set, runs the check inside that named network namespace
	// (`ip netns exec`): keepalived refuses interfaces that do not exist,
	// so tests check inside a namespace that has them.
	Netns string
	// Root is prepended to the absolute script paths named in
	// keepalived.conf, to check a rendered node tree (out/nodes/NAME)
	// rather than the live filesystem. Empty means the live filesystem.
	Root string
	// Keepalived, Haproxy and Vtysh are the binaries; empty means from
	// PATH.
	Keepalived, Haproxy, Vtysh string
}

// Keepalived checks a keepalived.conf.
//
// keepalived 2.2.7 (Debian 12) has a bug in --config-test: as soon as the
// file has a vrrp_script it kills itself with SIGTERM after parsing and
// exits 143, whether or not the scripts exist (fixed upstream in 2.2.8,
// acassen/keepalived#2587). So the config is tested twice: once without its
// script tracking, where the exit status is trustworthy, and once whole,
// where any diagnostic fails the check; the scripts themselves are checked
// here the way keepalived's script security would.
func Keepalived(ctx context.Context, conf []byte, o Options) error {
	dir, err := os.MkdirTemp("", "vipctl-check-")
	if err != nil {
		return err
	}
	defer removeAll(dir)

	stripped := stripScripts(conf)
	strippedPath := filepath.Join(dir, "keepalived-noscripts.conf")
	if err := os.WriteFile(strippedPath, stripped, 0o600); err != nil {
		return err
	}
	if out, err := o.Run(ctx, o.Binary(o.Keepalived, "keepalived"), "--config-test", "-f", strippedPath); err != nil || len(bytes.TrimSpace(out)) > 0 {
		return fmt.Errorf("keepalived --config-test: %s", Diagnose(out, err))
	}

	fullPath := filepath.Join(dir, "keepalived.conf")
	if err := os.WriteFile(fullPath, conf, 0o600); err != nil {
		return err
	}
	out, err := o.Run(ctx, o.Binary(o.Keepalived, "keepalived"), "--config-test", "-f", fullPath)
	if !acceptable(err) || len(bytes.TrimSpace(out)) > 0 {
		return fmt.Errorf("keepalived --config-test: %s", Diagnose(out, err))
	}
	return o.checkScripts(conf)
}

// FRR checks a frr.conf with `vtysh -C -f` (a dry run: vtysh parses every
// line with the grammar of the daemons it was built with and applies
// nothing, so no daemon need be running). It needs no interface, so it
// runs wherever vipctl runs. vtysh reads its own vtysh.conf first and
// complains when there is none (a node's /etc/frr is vipctl's, holding
// frr.conf only), so it is pointed at an empty one beside the candidate.
func FRR(ctx context.Context, conf []byte, o Options) error {
	return WithFile("frr.conf", conf, func(path string) error {
		dir := filepath.Dir(path)
		if err := os.WriteFile(filepath.Join(dir, "vtysh.conf"), nil, 0o600); err != nil {
			return err
		}
		out, err := (Options{}).Run(ctx, o.Binary(o.Vtysh, "vtysh"), "--config_dir", dir, "-C", "-f", path)
		if err != nil || len(bytes.TrimSpace(out)) > 0 {
			return fmt.Errorf("vtysh -C: %s", Diagnose(out, err))
		}
		return nil
	})
}

// WithFile hands check a private temporary copy of data named name, gone
// when check returns: the daemons judge files, not stdin.
func WithFile(name string, data []byte, check func(path string) error) error {
	dir, err := os.MkdirTemp("", "vipctl-check-")
	if err != nil {
		return err
	}
	defer removeAll(dir)
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return err
	}
	return check(path)
}

// Binary is set when set, else the named binary from PATH.
func (o Options) Binary(set, name string) string {
	if set != "" {
		return set
	}
	return name
}

// Run runs argv, inside Netns when set, and returns its output (stdout
// and stderr together).
func (o Options) Run(ctx context.Context, argv ...string) ([]byte, error) {
	if o.Netns != "" {
		argv = append([]string{"ip", "netns", "exec", o.Netns}, argv...)
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	return out.Bytes(), err
}

// acceptable is exit 0, or death by SIGTERM (the 2.2.7 bug above; through
// `ip netns exec` it surfaces as exit status 143).
func acceptable(err error) bool {
	if err == nil {
		return true
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		return false
	}
	if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGTERM {
		return true
	}
	return exit.ExitCode() == 128+int(syscall.SIGTERM)
}

// Diagnose turns a daemon's output into one bounded, redacted message. It
// ends up in the sidecar's log, a ConfigKept Event and the failures the
// tests print; a daemon that echoes the offending config line could put a
// password there, and a runaway one megabytes, or terminal escapes.
func Diagnose(out []byte, err error) string {
	msg := bound(string(out))
	if msg == "" && err != nil {
		return err.Error()
	}
	if err != nil {
		return fmt.Sprintf("%s (%v)", msg, err)
	}
	return msg
}

// Limits on what Diagnose passes on from a daemon: enough to see the first
// few problems, never a whole config.
const (
	maxDiagnosticLines     = 10
	maxDiagnosticLineBytes = 200
)

// secretWord marks a line whose rest may hold a credential (keepalived's
// auth_pass, haproxy's userlist passwords, anything called a secret or a
// token: redact.Words): the word stays, what follows it is dropped. A
// daemon's line is cut, not parsed: it may quote half a config line.
var secretWord = regexp.MustCompile(`(?i)(` + redact.Words + `)`)

// bound keeps the first maxDiagnosticLines lines, each cut at
// maxDiagnosticLineBytes, with control characters replaced and anything
// after a secretWord redacted.
func bound(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	var kept []string
	for i, l := range lines {
		if i == maxDiagnosticLines {
			kept = append(kept, fmt.Sprintf("… (%d more lines)", len(lines)-i))
			break
		}
		l = strings.Map(func(r rune) rune {
			if r < 0x20 && r != '\t' || r == 0x7f || r == utf8.RuneError {
				return '?'
			}
			return r
		}, l)
		if loc := secretWord.FindStringIndex(l); loc != nil {
			l = l[:loc[1]] + " <redacted>"
		}
		if len(l) > maxDiagnosticLineBytes {
			cut := maxDiagnosticLineBytes
			for cut > 0 && !utf8.RuneStart(l[cut]) {
				cut--
			}
			l = l[:cut] + "…"
		}
		kept = append(kept, l)
	}
	return strings.Join(kept, "\n")
}

var (
	scriptBlock = regexp.MustCompile(`(?ms)^\s*vrrp_script\s+\S+\s*\{.*?^\s*\}\s*$`)
	trackBlock  = regexp.MustCompile(`(?ms)^\s*track_script\s*\{.*?^\s*\}\s*$`)
	scriptLine  = regexp.MustCompile(`(?m)^\s*script\s+"([^"]+)"`)
)

// stripScripts removes vrrp_script blocks and the track_script references
// to them. It relies on the renderer's layout (closing braces on their own
// line), which the golden files pin.
func stripScripts(conf []byte) []byte {
	conf = scriptBlock.ReplaceAll(conf, nil)
	return trackBlock.ReplaceAll(conf, nil)
}

// checkScripts applies keepalived's enable_script_security rules, which
// otherwise disable a script silently: the file must exist and be
// executable, and neither it nor a directory above it may be writable by
// group or others (unless sticky, like /tmp).
func (o Options) checkScripts(conf []byte) error {
	var errs []error
	for _, m := range scriptLine.FindAllSubmatch(conf, -1) {
		path := strings.Fields(string(m[1]))[0]
		if !filepath.IsAbs(path) {
			errs = append(errs, fmt.Errorf("script %s: path must be absolute", path))
			continue
		}
		onDisk := filepath.Join(o.Root, path)
		st, err := os.Stat(onDisk)
		if err != nil {
			errs = append(errs, fmt.Errorf("script %s: %w", path, err))
			continue
		}
		if st.Mode()&0o111 == 0 {
			errs = append(errs, fmt.Errorf("script %s: not executable (mode %v)", path, st.Mode().Perm()))
		}
		if st.Mode()&0o022 != 0 {
			errs = append(errs, fmt.Errorf("script %s: writable by group or others (mode %v): keepalived would disable it", path, st.Mode().Perm()))
		}
		for dir := filepath.Dir(onDisk); ; dir = filepath.Dir(dir) {
			if dst, err := os.Stat(dir); err == nil && dst.Mode()&0o022 != 0 && dst.Mode()&fs.ModeSticky == 0 {
				errs = append(errs, fmt.Errorf("script %s: directory %s is writable by group or others: keepalived would disable the script", path, dir))
			}
			if dir == filepath.Dir(dir) {
				break
			}
		}
	}
	return errors.Join(errs...)
}

// removeAll cleans up a check's scratch directory; failing to is not the
// check's failure.
func removeAll(dir string) { _ = os.RemoveAll(dir) }
