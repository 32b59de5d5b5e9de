// Package render turns a validated ClusterVIPs and the cluster's state into
// the files a node's daemons read: keepalived.conf, haproxy.cfg and the
// check script. NewPlan works out every VRRP instance and its members once
// (plan.go); Plan.Node then renders one node's view of it through the
// templates (keepalived.go, haproxy.go) without changing the plan, and
// Plan.Handover, InternalGuard and Announced what the node's data plane
// is told to hold. The node's layout and those types are pkg/onnode's.
// It is pure: no I/O, no clock, no network. The same code serves
// `vipctl render` (preview) and the runtimecfg sidecar (live).
package render
