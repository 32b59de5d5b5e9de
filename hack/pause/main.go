// Command pause is the kubelet lab's pod sandbox process (containerd's
// sandbox_image): it holds the pod's namespaces until it is told to stop.
// Built here because no registry with registry.k8s.io/pause is reachable.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			return
		}
		// The keepalived pod shares its PID namespace (shareProcessNamespace),
		// which makes this process its init: orphans of any container are
		// re-parented here and must be reaped, or they stay zombies.
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
