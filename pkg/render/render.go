package render

import (
	"bytes"
	"io"
	"io/fs"
	"sync"

	"github.com/vipctl/vipctl/pkg/frr"
	"github.com/vipctl/vipctl/pkg/haproxy"
	"github.com/vipctl/vipctl/pkg/keepalived"
	"github.com/vipctl/vipctl/pkg/onnode"
)

// Script modes: keepalived refuses scripts that others can write.
const (
	scriptMode = 0o755
	configMode = 0o644
	// secretMode is frr.conf's with a BGP password in it: root's alone
	// (bgpd, which drops to user frr, starts from frr.PrepareRun's copy).
	secretMode = 0o600
)

// NodeRender is one node's part of a plan.
type NodeRender struct {
	// Files are every file the sidecar writes on the node: keepalived.conf,
	// haproxy.cfg on control-plane nodes (none in mode poolsOnly), and the
	// check script they call.
	Files []onnode.File
	// Lonely says which instances were left out for lack of a peer
	// (WithLonelySkipped).
	Lonely []string
	// Announced is what the node announces by BGP, per bgp pool.
	Announced []onnode.Announced
}

// Node renders one node's part of the plan. The plan is not changed: any
// number of nodes can be rendered from one plan, in any order.
func (p *Plan) Node(node string) (NodeRender, error) {
	kv, err := p.keepalivedView(node)
	if err != nil {
		return NodeRender{}, err
	}
	files, err := p.nodeFiles(node, kv)
	return NodeRender{Files: files, Lonely: kv.lonely, Announced: p.Announced(node)}, err
}

// NodeFiles renders the node's files (Node's Files).
func (p *Plan) NodeFiles(node string) ([]onnode.File, error) {
	r, err := p.Node(node)
	return r.Files, err
}

func (p *Plan) nodeFiles(node string, kv *keepalivedView) ([]onnode.File, error) {
	kconf, err := write(func(w io.Writer) error { return keepalived.Write(w, &kv.Config) })
	if err != nil {
		return nil, err
	}
	files := []onnode.File{{Path: onnode.KeepalivedConfPath, Mode: configMode, Data: kconf}}
	if p.HasAPI() && p.IsControlPlane(node) {
		hc, err := p.haproxyConfig(node)
		if err != nil {
			return nil, err
		}
		hconf, err := write(func(w io.Writer) error { return haproxy.Write(w, hc) })
		if err != nil {
			return nil, err
		}
		files = append(files, onnode.File{Path: onnode.HaproxyConfPath, Mode: configMode, Data: hconf})
	}
	if p.runsFRR(node) {
		view := p.frrView(node)
		fconf, err := write(func(w io.Writer) error { return frr.Write(w, view) })
		if err != nil {
			return nil, err
		}
		mode := fs.FileMode(configMode)
		if view.HasPassword() {
			mode = secretMode
		}
		files = append(files, onnode.File{Path: onnode.FRRConfPath, Mode: mode, Data: fconf})
	}
	scripts := ScriptFiles()
	return append(files, scripts...), nil
}

// ScriptFiles are the check scripts, identical on every node: every node's
// File shares one copy of the bytes, which nobody changes.
func ScriptFiles() []onnode.File {
	return []onnode.File{{Path: onnode.ScriptsDir + "/" + keepalived.CheckHTTP, Mode: scriptMode, Data: keepalived.CheckHTTPScript()}}
}

// buffers are the templates' scratch space: a render of every node of a
// large cluster would otherwise grow a buffer from nothing for each file,
// allocating about twice the output (issue 47).
var buffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// write returns what render writes, through a pooled buffer.
func write(render func(w io.Writer) error) ([]byte, error) {
	b := buffers.Get().(*bytes.Buffer)
	defer func() {
		b.Reset()
		buffers.Put(b)
	}()
	if err := render(b); err != nil {
		return nil, err
	}
	return bytes.Clone(b.Bytes()), nil
}
