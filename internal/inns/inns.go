// Package inns runs code inside a named network namespace.
package inns

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/vishvananda/netns"
)

// Run calls fn on a thread locked into the named network namespace (""
// runs fn where it is), so that sockets fn opens, netlink's among them,
// belong to that namespace. If switching back fails the thread stays
// locked, so the runtime retires it rather than reuse a thread in the
// wrong namespace.
func Run(name string, fn func() error) error {
	if name == "" {
		return fn()
	}
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer func() { _ = orig.Close() }()
	target, err := netns.GetFromName(name)
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("network namespace %s: %w", name, err)
	}
	defer func() { _ = target.Close() }()
	if err := netns.Set(target); err != nil {
		runtime.UnlockOSThread()
		return err
	}
	fnErr := fn()
	if err := netns.Set(orig); err != nil {
		return errors.Join(fnErr, fmt.Errorf("returning to the original namespace: %w", err))
	}
	runtime.UnlockOSThread()
	return fnErr
}
