// Package haproxy is haproxy's one home in vipctl: its config (Config,
// the template haproxy.cfg.tmpl, Write; pkg/render fills Config from the
// plan), its command line (Args, for the static pod, the bootstrap host
// and the lab), its judge (Check, `haproxy -c`), and the running daemon
// reached: the master socket Args opens, for the reload and the master's
// PID, and any socket's one-command answer.
package haproxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vipctl/vipctl/pkg/host"
	"github.com/vipctl/vipctl/pkg/onnode"
)

// dialTimeout bounds a connection to a socket; a command's answer has
// its own deadline.
const dialTimeout = 2 * time.Second

func dial(ctx context.Context, sock string) (net.Conn, error) {
	d := net.Dialer{Timeout: dialTimeout}
	return d.DialContext(ctx, "unix", sock)
}

// Command sends one command to the haproxy socket sock (a path on this
// host) and returns its answer, at most limit bytes, read until haproxy
// closes the connection or timeout passes. The master CLI keeps the
// connection open after a command: end it with "; quit".
func Command(ctx context.Context, sock, command string, timeout time.Duration, limit int64) ([]byte, error) {
	conn, err := dial(ctx, sock)
	if err != nil {
		return nil, err
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	if _, err := conn.Write([]byte(command + "\n")); err != nil {
		return nil, err
	}
	return io.ReadAll(io.LimitReader(bufio.NewReader(conn), limit))
}

// MasterPID asks the node's haproxy master socket for the master's PID:
// the line of `show proc` whose type is master. 0 when nothing answers
// (haproxy not running, or not on this node: a worker).
func MasterPID(ctx context.Context, t host.Target) int {
	conn, err := dial(ctx, t.Path(onnode.HaproxyMasterSocket))
	if err != nil {
		return 0
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Write([]byte("show proc\n")); err != nil {
		return 0
	}
	sc := bufio.NewScanner(conn)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) >= 2 && f[1] == "master" {
			if pid, err := strconv.Atoi(f[0]); err == nil {
				return pid
			}
		}
	}
	return 0
}

// Reload asks the node's haproxy master to reload through its master
// socket: new workers take over the listening sockets, old ones finish
// their connections. false means haproxy is not running yet.
func Reload(ctx context.Context, t host.Target) (bool, error) {
	sock := t.Path(onnode.HaproxyMasterSocket)
	if _, err := os.Stat(sock); errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	conn, err := dial(ctx, sock)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			return false, nil
		}
		return false, fmt.Errorf("haproxy master socket: %w", err)
	}
	defer func() { _ = conn.Close() }()
	if _, err := conn.Write([]byte("reload\n")); err != nil {
		return false, fmt.Errorf("haproxy reload: %w", err)
	}
	return true, nil
}
