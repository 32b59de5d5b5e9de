// Package e2e holds the end-to-end tests of the namespace lab: a real
// kube-apiserver with etcd (test/testapiserver) and real
// keepalived/haproxy in network namespaces (test/netlab), and the peers'
// benchmarks. They need root; CI runs them as root. The kubelet lab's
// suite is test/e2e/kubelet, the cluster lab's test/e2e/cluster and the
// guides' test/e2e/docs; make test runs this one in two halves side by
// side (hack/test.sh), then those one at a time (docs/lab.md, "Suites").
//
// Tests that need only an apiserver of their own (no network namespace,
// no keepalived or haproxy, no Prometheus, no request counted against a
// clock) call t.Parallel(): Go runs them together after every other test of
// their run has ended, so they never share a test binary with a failover
// being measured (the other half of make test's may be measuring one
// beside them). make test runs them four at a time (-parallel 4).
// TestAllocatorTenants (Prometheus alerts) and TestUpdateAndStatus (once
// failed among them, cause not found) stay in the sequential run.
package e2e
