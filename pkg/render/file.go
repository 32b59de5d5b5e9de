// Package render turns a validated ClusterVIPs and the cluster's state into
// the files a node's daemons read: keepalived.conf, haproxy.cfg and the
// check script. NewPlan works out every VRRP instance and its members once
// (plan.go); Plan.Node then renders one node's view of it through the
// templates (keepalived.go, haproxy.go) without changing the plan. paths.go
// is the layout of a node (paths, ports) every package shares. It is pure:
// no I/O, no clock, no network. The same code serves `vipctl render`
// (preview) and the runtimecfg sidecar (live).
package render

import "io/fs"

// File is one file to lay on a node: an absolute path on the node, its mode
// and its content.
type File struct {
	Path string
	Mode fs.FileMode
	Data []byte
}
