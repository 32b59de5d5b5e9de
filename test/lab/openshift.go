package lab

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"text/template"

	"github.com/vipctl/vipctl/test/fixture"
	"github.com/vipctl/vipctl/test/netlab"
)

// OpenShiftVRRP is what OpenShift's own keepalived carries on a cluster
// installed with the default load balancer: the API VIP and the default
// ingress VIP, with the IDs baremetal-runtimecfg derives from the cluster
// name (vrid.OpenShiftIDs, which `vipctl vr-ids` prints).
type OpenShiftVRRP struct {
	Cluster             string
	APIVIP, IngressVIP  string // IPv4: the lab's OpenShift runs one family
	APIID, IngressID    uint8
	Masters, AllNodes   []string // node addresses: the API and ingress peers
	Interface, NodeAddr string
	// Dir is the node root the config's paths (its check scripts) live
	// under.
	Dir string
}

// openShiftConf is keepalived.conf as OpenShift's keepalived-monitor
// renders it on a node (the MCO's on-prem keepalived.conf.tmpl through
// baremetal-runtimecfg, unicast, one address family): global settings,
// the API instance held by masters at base priority 40 raised by its load
// balancer checks, the ingress instance on every node at 20 raised by its
// router checks, VRRPv2 (keepalived's default) with PASS authentication,
// VIPs as /32 labelled vip. Only the checks differ (names, intervals,
// weights, rise and fall are OpenShift's): each is a script under the
// node's root in front of /etc/keepalived that passes at once, where
// OpenShift's ask haproxy, the machine config server and the router's
// health port, each under /usr/bin/timeout (0.9 s for the router's). On
// a loaded machine even a script that only exits ran out of 0.9 s, and
// OpenShift's ingress VIP flapped for reasons of the lab's own.
var openShiftConf = template.Must(template.New("openshift").Parse(`global_defs {
    enable_script_security
    script_user root
    max_auto_priority -1
    vrrp_garp_master_refresh 60
}

vrrp_script chk_ocp_lb {
    script "{{ .Dir }}/etc/keepalived/chk_ocp_script.sh"
    interval 2
    weight 20
    rise 3
    fall 3
}

vrrp_script chk_ocp_both {
    script "{{ .Dir }}/etc/keepalived/chk_ocp_script_both.sh"
    interval 2
    weight 5
    rise 3
    fall 3
}

vrrp_script chk_mcs {
    script "{{ .Dir }}/etc/keepalived/chk_mcs_script.sh"
    interval 2
    weight 3
    rise 3
    fall 3
}

vrrp_script chk_ingress_ready {
    script "{{ .Dir }}/etc/keepalived/chk_ingress_ready.sh"
    interval 1
    weight 10
    rise 3
    fall 2
}

vrrp_script chk_ingress {
    script "{{ .Dir }}/etc/keepalived/chk_ingress.sh"
    interval 1
    rise 3
    fall 2
}

vrrp_script chk_default_ingress {
    script "{{ .Dir }}/etc/keepalived/chk_default_ingress.sh"
    interval 5
    weight 50
    rise 3
    fall 2
}
{{ $self := .NodeAddr }}{{ if .IsMaster }}
vrrp_instance {{ .Cluster }}_API_0 {
    state BACKUP
    interface {{ .Interface }}
    virtual_router_id {{ .APIID }}
    priority 40
    advert_int 1
    unicast_src_ip {{ .NodeAddr }}
    unicast_peer {
{{- range .Masters }}{{ if ne . $self }}
        {{ . }}
{{- end }}{{ end }}
    }
    authentication {
        auth_type PASS
        auth_pass {{ .Cluster }}_api_vip
    }
    virtual_ipaddress {
        {{ .APIVIP }}/32 label vip
    }
    track_script {
        chk_ocp_lb
        chk_ocp_both
        chk_mcs
    }
}
{{ end }}
vrrp_instance {{ .Cluster }}_INGRESS_0 {
    state BACKUP
    interface {{ .Interface }}
    virtual_router_id {{ .IngressID }}
    priority 20
    advert_int 1
    unicast_src_ip {{ .NodeAddr }}
    unicast_peer {
{{- range .AllNodes }}{{ if ne . $self }}
        {{ . }}
{{- end }}{{ end }}
    }
    authentication {
        auth_type PASS
        auth_pass {{ .Cluster }}_ingress_vip
    }
    virtual_ipaddress {
        {{ .IngressVIP }}/32 label vip
    }
    track_script {
        chk_ingress
        chk_ingress_ready
        chk_default_ingress
    }
}
`))

// OpenShiftKeepalived is OpenShift's own keepalived running on a lab
// node beside vipctl's.
type OpenShiftKeepalived struct {
	Proc *netlab.Proc
	// Conf is the keepalived.conf written for it, at ConfPath.
	Conf     []byte
	ConfPath string
	dir      string
}

// openShiftRunDir is the keepalived container's run directory (an
// emptyDir there): the PID files and, as TMPDIR, its statistics.
const openShiftRunDir = "/var/run/keepalived"

// StartOpenShiftKeepalived renders OpenShift's keepalived.conf for n into
// OpenShift's own path (fixture.OpenShiftKeepalivedConf) under the node's
// root, with check scripts that pass (a healthy haproxy, machine config
// server and default router), and starts keepalived with the command line
// of OpenShift's keepalived container (--dont-fork --vrrp --log-detail
// --log-console). Its PID files get paths of their own: in the container
// they sit in a mount namespace of its own, on the lab's shared
// filesystem they would collide (lab-notes pitfall 3).
func (n *Node) StartOpenShiftKeepalived(t testing.TB, o OpenShiftVRRP) *OpenShiftKeepalived {
	t.Helper()
	o.Dir, o.NodeAddr = n.Target.Root, n.Addr
	if o.Interface == "" {
		o.Interface = "br-ex"
	}
	view := struct {
		OpenShiftVRRP
		IsMaster bool
	}{o, false}
	for _, m := range o.Masters {
		view.IsMaster = view.IsMaster || m == n.Addr
	}
	var conf bytes.Buffer
	if err := openShiftConf.Execute(&conf, view); err != nil {
		t.Fatal(err)
	}
	k := &OpenShiftKeepalived{Conf: conf.Bytes(), ConfPath: filepath.Join(n.Target.Root, fixture.OpenShiftKeepalivedConf), dir: n.Target.Root}
	for _, d := range []string{filepath.Dir(k.ConfPath), filepath.Join(k.dir, openShiftRunDir)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []string{"chk_ocp_script.sh", "chk_ocp_script_both.sh", "chk_mcs_script.sh", "chk_ingress.sh", "chk_ingress_ready.sh", "chk_default_ingress.sh"} {
		if err := os.WriteFile(filepath.Join(filepath.Dir(k.ConfPath), s), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(k.ConfPath, k.Conf, 0o644); err != nil {
		t.Fatal(err)
	}
	run := filepath.Join(k.dir, openShiftRunDir)
	k.Proc = n.Host.Start("openshift-keepalived", "env", "TMPDIR="+run,
		"keepalived", "-f", k.ConfPath, "--dont-fork", "--vrrp", "--log-detail", "--log-console",
		"-p", filepath.Join(run, "keepalived.pid"), "-r", filepath.Join(run, "vrrp.pid"))
	return k
}

// Stats asks this keepalived for its counters, by instance.
func (k *OpenShiftKeepalived) Stats(t testing.TB) map[string]VRRPStats {
	t.Helper()
	run := filepath.Join(k.dir, openShiftRunDir)
	return ReadKeepalivedStats(t, filepath.Join(run, "keepalived.pid"), run)
}

// LogSize is where its log ends now, for Transitions.
func (k *OpenShiftKeepalived) LogSize() int {
	data, _ := os.ReadFile(k.Proc.Log)
	return len(data)
}

// Transitions lists the VRRP state changes it logged since offset.
func (k *OpenShiftKeepalived) Transitions(offset int) []string {
	data, _ := os.ReadFile(k.Proc.Log)
	var out []string
	for _, line := range strings.Split(string(data[min(offset, len(data)):]), "\n") {
		if transitionRE.MatchString(line) {
			out = append(out, strings.TrimSpace(line))
		}
	}
	return out
}
