// Package e2e holds the end-to-end tests: a real kube-apiserver with etcd
// (test/testapiserver) and real keepalived/haproxy in network
// namespaces (test/netlab). They need root; CI runs them as root.
package e2e
