// Package render turns a validated ClusterVIPs and facts about the nodes into
// the files a node needs: keepalived.conf, haproxy.cfg, check scripts and
// static pod manifests. It is pure: no I/O, no clock, no network. The same
// code serves `vipctl render` (preview) and the runtimecfg sidecar (live).
package render

import "io/fs"

// File is one file to lay on a node: an absolute path on the node, its mode
// and its content.
type File struct {
	Path string
	Mode fs.FileMode
	Data []byte
}
