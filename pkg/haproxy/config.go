package haproxy

import (
	"context"
	_ "embed"
	"fmt"
	"io"
	"text/template"

	"github.com/Masterminds/sprig/v3"
	"github.com/vipctl/vipctl/pkg/configcheck"
	"github.com/vipctl/vipctl/pkg/onnode"
)

// Config is what one node's haproxy.cfg says; pkg/render fills it from
// the plan (which servers, which ports), and Write turns it into the file
// through haproxy.cfg.tmpl. Nothing is computed in the template.
type Config struct {
	Node, Cluster string
	StatsSocket   string
	StatsPort     int
	Frontends     []Frontend
	HealthBinds   []string
	APIBackend    string
	LiveBackend   string
	// APIServers names the servers of the API backend, and Quorum is how
	// many of them must be alive for this haproxy to count as serving
	// while none is ready.
	APIServers []string
	Quorum     int
}

// Frontend is one port haproxy balances over the control-plane nodes.
type Frontend struct {
	Name  string
	Binds []string
	// Check is the path haproxy's health check asks each server for.
	Check string
	// Live, when set, is the path of a second check that tells a live
	// server from a dead one: live servers take the traffic when none
	// passes Check.
	Live    string
	Servers []Server
}

// Server is one backend server: a node's name and its address:port.
type Server struct {
	Name, Address string
}

//go:embed haproxy.cfg.tmpl
var configTemplate string

// parsed is the template with sprig's function map (the house style:
// no hand-written helpers) and missingkey=error; a broken template fails
// every test at once.
var parsed = template.Must(template.New("haproxy").Option("missingkey=error").
	Funcs(sprig.TxtFuncMap()).Parse(configTemplate))

// Write renders c as haproxy.cfg to w.
func Write(w io.Writer, c *Config) error {
	if err := parsed.ExecuteTemplate(w, "haproxy.cfg", c); err != nil {
		return fmt.Errorf("rendering haproxy.cfg: %w", err)
	}
	return nil
}

// Args is haproxy's command line, with every node path under root (empty
// on a node). Master-worker mode: a reload through the master socket
// starts new workers on the listening sockets the master keeps, so no
// connection is refused during a reload.
func Args(root string) []string {
	return []string{
		"haproxy", "-W", "-db",
		"-S", root + onnode.HaproxyMasterSocket + ",level,admin",
		"-f", root + onnode.HaproxyConfPath,
	}
}

// Check has the real haproxy judge cfg (`haproxy -c`); its success
// message is not passed on.
func Check(ctx context.Context, cfg []byte, o configcheck.Options) error {
	return configcheck.WithFile("haproxy.cfg", cfg, func(path string) error {
		out, err := o.Run(ctx, o.Binary(o.Haproxy, "haproxy"), "-c", "-f", path)
		if err != nil {
			return fmt.Errorf("haproxy -c: %s", configcheck.Diagnose(out, err))
		}
		return nil
	})
}
