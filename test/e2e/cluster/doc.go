// Package cluster is the cluster lab's suite (test/clusterlab,
// docs/lab.md): TestCluster, a real cluster of three control-plane
// nodes and a worker under real kubelets, and BenchmarkFailoverCluster.
// It needs root and runs alone: `go test ./test/e2e/cluster/`.
package cluster
