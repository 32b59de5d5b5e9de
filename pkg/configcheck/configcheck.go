// Package configcheck is the runner with which the real daemons judge
// rendered configuration (keepalived.Check, haproxy.Check, frr.Check,
// each in its daemon's package): a private copy of the file (WithFile),
// the binary run in the node's namespace (Options.Run), and its answer
// bounded and redacted (Diagnose); a success message is not passed on.
// The sidecar judges before every swap, the tests every rendered file.
package configcheck

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
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

// removeAll cleans up a check's scratch directory; failing to is not the
// check's failure.
func removeAll(dir string) { _ = os.RemoveAll(dir) }
