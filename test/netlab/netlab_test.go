package netlab

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// serve listens inside host h and answers every connection with its name.
// serve answers every connection to addr with the host's name.
func serve(h *Host, addr string) {
	h.Serve(addr, func(c net.Conn) { _, _ = io.WriteString(c, h.Name) })
}

// fetch connects from inside host h and returns what the server said.
func fetch(h *Host, addr string) (string, error) {
	var got string
	err := h.Do(func() error {
		c, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(time.Second))
		b, err := io.ReadAll(c)
		got = string(b)
		return err
	})
	return got, err
}

func TestLab(t *testing.T) {
	var prefix string
	t.Run("hosts reach each other, a host taken off the network is cut off", func(t *testing.T) {
		lab := New(t)
		prefix = lab.Prefix()
		a := lab.AddHost("a", HostOpts{Addrs: []string{"198.51.100.11/24", "2001:db8:100::11/64"}})
		b := lab.AddHost("b", HostOpts{Addrs: []string{"198.51.100.12/24", "2001:db8:100::12/64"}})
		serve(b, ":8080")
		for _, addr := range []string{"198.51.100.12:8080", "[2001:db8:100::12]:8080"} {
			if got, err := fetch(a, addr); err != nil || got != "b" {
				t.Fatalf("a -> %s: %q, %v", addr, got, err)
			}
		}
		if out := a.MustExec("ip", "-br", "link", "show", "br-ex"); !strings.HasPrefix(string(out), "br-ex") {
			t.Errorf("host interface not named br-ex: %s", out)
		}
		b.LinkDown()
		if _, err := fetch(a, "198.51.100.12:8080"); err == nil {
			t.Error("b still reachable with its cable pulled")
		}
		b.LinkUp()
		var err error
		for i := 0; i < 50; i++ {
			if _, err = fetch(a, "198.51.100.12:8080"); err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			t.Errorf("b unreachable after the cable is back: %v", err)
		}
	})
	t.Run("cleanup left nothing behind", func(t *testing.T) {
		left, err := Namespaces(prefix)
		if err != nil {
			t.Fatal(err)
		}
		if len(left) > 0 {
			t.Errorf("namespaces left behind: %v", left)
		}
	})
}

func TestRouterJoinsSegments(t *testing.T) {
	lab := New(t)
	lab.AddSegment("b")
	lab.AddRouter("r", map[string][]string{"a": {"198.51.100.1/24"}, "b": {"203.0.113.1/24"}})
	a := lab.AddHost("a", HostOpts{Addrs: []string{"198.51.100.11/24"}, Gateways: []string{"198.51.100.1"}})
	c := lab.AddHost("c", HostOpts{Segment: "b", Addrs: []string{"203.0.113.21/24"}, Gateways: []string{"203.0.113.1"}})
	serve(c, ":8080")
	if got, err := fetch(a, "203.0.113.21:8080"); err != nil || got != "c" {
		t.Fatalf("across the router: %q, %v", got, err)
	}
}

func TestProcessesStoppedByPID(t *testing.T) {
	lab := New(t)
	h := lab.AddHost("a", HostOpts{Addrs: []string{"198.51.100.11/24"}})
	p := h.Start("sleeper", "sh", "-c", "sleep 300 & sleep 300; wait")
	time.Sleep(200 * time.Millisecond)
	if p.Exited() {
		t.Fatalf("exited early: %s", p.LogTail(5))
	}
	p.Stop()
	if !p.Exited() {
		t.Fatal("still running after Stop")
	}
	// Its background child was in the same group and got the signal too;
	// it may take a moment longer than the shell to die (a busy machine).
	var left []string
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if left = groupMembers(t, p.PID()); len(left) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(left) > 0 {
		t.Errorf("group %d still has processes %v 3s after Stop", p.PID(), left)
	}
}

// groupMembers lists live PIDs whose process group is pgid, from /proc.
func groupMembers(t *testing.T, pgid int) []string {
	t.Helper()
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range stats {
		data, err := os.ReadFile(s)
		if err != nil {
			continue // exited meanwhile
		}
		// Fields after the parenthesised command: state ppid pgrp ...
		rest := string(data[strings.LastIndexByte(string(data), ')')+2:])
		f := strings.Fields(rest)
		if len(f) > 2 && f[2] == fmt.Sprint(pgid) && f[0] != "Z" {
			out = append(out, s)
		}
	}
	return out
}
