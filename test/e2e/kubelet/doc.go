// Package kubelet is the kubelet lab's suite (test/kubeletlab,
// docs/lab.md): three control-plane nodes booted from the rendered
// MachineConfig, each with its own containerd and kubelet running
// vipctl's static pods (TestKubelet*), and the failover and announce
// benchmarks in that lab. It needs root and runs alone:
// `go test ./test/e2e/kubelet/`.
package kubelet
