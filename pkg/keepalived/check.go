package keepalived

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

	"github.com/vipctl/vipctl/pkg/configcheck"
)

// Check has the real keepalived judge a keepalived.conf.
//
// keepalived 2.2.7 (Debian 12) has a bug in --config-test: as soon as the
// file has a vrrp_script it kills itself with SIGTERM after parsing and
// exits 143, whether or not the scripts exist (fixed upstream in 2.2.8,
// acassen/keepalived#2587). So the config is tested twice: once without its
// script tracking, where the exit status is trustworthy, and once whole,
// where any diagnostic fails the check; the scripts themselves are checked
// here the way keepalived's script security would.
func Check(ctx context.Context, conf []byte, o configcheck.Options) error {
	dir, err := os.MkdirTemp("", "vipctl-check-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()

	stripped := stripScripts(conf)
	strippedPath := filepath.Join(dir, "keepalived-noscripts.conf")
	if err := os.WriteFile(strippedPath, stripped, 0o600); err != nil {
		return err
	}
	if out, err := o.Run(ctx, o.Binary(o.Keepalived, "keepalived"), "--config-test", "-f", strippedPath); err != nil || len(bytes.TrimSpace(out)) > 0 {
		return fmt.Errorf("keepalived --config-test: %s", configcheck.Diagnose(out, err))
	}

	fullPath := filepath.Join(dir, "keepalived.conf")
	if err := os.WriteFile(fullPath, conf, 0o600); err != nil {
		return err
	}
	out, err := o.Run(ctx, o.Binary(o.Keepalived, "keepalived"), "--config-test", "-f", fullPath)
	if !acceptable(err) || len(bytes.TrimSpace(out)) > 0 {
		return fmt.Errorf("keepalived --config-test: %s", configcheck.Diagnose(out, err))
	}
	return checkScripts(conf, o.Root)
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
func checkScripts(conf []byte, root string) error {
	var errs []error
	for _, m := range scriptLine.FindAllSubmatch(conf, -1) {
		path := strings.Fields(string(m[1]))[0]
		if !filepath.IsAbs(path) {
			errs = append(errs, fmt.Errorf("script %s: path must be absolute", path))
			continue
		}
		onDisk := filepath.Join(root, path)
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
