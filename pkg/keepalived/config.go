package keepalived

import (
	_ "embed"
	"fmt"
	"io"
	"text/template"

	"github.com/Masterminds/sprig/v3"
	"github.com/vipctl/vipctl/pkg/onnode"
)

// Config is what one node's keepalived.conf says; pkg/render fills it
// from the plan (instances, members, priorities, track files), and Write
// turns it into the file through keepalived.conf.tmpl. Nothing is
// computed in the template.
type Config struct {
	Node, Cluster, RouterID string
	ScriptUser              string
	Version                 int
	// GARPDelay, GARPRepeat and GARPRefresh: onnode's, in seconds.
	GARPDelay, GARPRepeat, GARPRefresh int
	// OwnInterfaces says some instance's VIPs live on an interface of
	// their own, where keepalived refreshes its gratuitous ARPs only when
	// told.
	OwnInterfaces bool
	Scripts       []Script
	TrackFiles    []TrackFile
	Instances     []Instance
}

// Script is a vrrp_script: a check keepalived runs.
type Script struct {
	Name, Command                 string
	Interval, Timeout, Fall, Rise int
}

// TrackFile is a track_file: a file whose number keepalived adds, times
// Weight, to the priority of the instances that track it.
type TrackFile struct {
	Name, Path, Why string
	Weight          int
}

// Instance is one vrrp_instance as this node runs it.
type Instance struct {
	Key, Name, Family, Why string
	Interface              string
	Version                int
	VRID                   uint8
	Priority               int
	Advert                 string
	UnicastSrc             string
	Peers                  []string
	// PeerCheck follows each unicast peer: the TTL an advert must arrive
	// with (see peerCheck).
	PeerCheck string
	VIPs      []string
	Excluded  []string
	// Sidecar says the vipctl sidecar adds the instance's Service
	// addresses while this node holds it (announce: sidecar). keepalived.conf
	// neither names nor counts them, so a new Service reloads nothing.
	Sidecar bool
	// VIPInterface is where the VIPs live when not on Interface (a pool's
	// or an IngressController's own interface); keepalived tracks it.
	VIPInterface string
	TrackScripts []string
	TrackFiles   []string
}

// CheckHTTP is the check script keepalived's vrrp_scripts run (haproxy's
// health and the routers'), laid under onnode.ScriptsDir on every node.
// A static file, never rendered: nothing from the cluster file ever
// reaches a shell.
const CheckHTTP = "check-http.sh"

//go:embed check-http.sh
var checkHTTP []byte

// CheckHTTPScript is CheckHTTP's content: one copy shared by every
// caller, which nobody may change.
func CheckHTTPScript() []byte { return checkHTTP }

//go:embed keepalived.conf.tmpl
var configTemplate string

// parsed is the template with sprig's function map (the house style:
// no hand-written helpers) and missingkey=error; a broken template fails
// every test at once.
var parsed = template.Must(template.New("keepalived").Option("missingkey=error").
	Funcs(sprig.TxtFuncMap()).Parse(configTemplate))

// Write renders c as keepalived.conf to w.
func Write(w io.Writer, c *Config) error {
	if err := parsed.ExecuteTemplate(w, "keepalived.conf", c); err != nil {
		return fmt.Errorf("rendering keepalived.conf: %w", err)
	}
	return nil
}

// Args is keepalived's command line, with every node path
// under root ("" on a real node): the static pod and the lab start it
// alike. In the foreground (the pod's main process), logging to the
// console and not to syslog, with the PID files the sidecar signals and
// the preStop hook reads.
func Args(root string) []string {
	return []string{
		"keepalived", "-n", "-l", "-D", "-G",
		"-f", root + onnode.KeepalivedConfPath,
		"-p", root + onnode.KeepalivedPIDFile,
		"-r", root + onnode.VRRPPIDFile,
		"-c", root + onnode.CheckersPIDFile,
	}
}
