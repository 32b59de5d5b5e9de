package bootstrap

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"slices"
	"strings"

	ignconfig "github.com/coreos/ignition/v2/config"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/nodelist"
	"github.com/vipctl/vipctl/pkg/version"
)

// The bootstrap machine's copy of the inputs and its unit, as AddToIgnition
// writes them: one directory for both files, mounted into vipctl's image.
const (
	IgnitionDir        = "/etc/vipctl-bootstrap"
	IgnitionConfigPath = IgnitionDir + "/cluster.yaml"
	IgnitionNodesPath  = IgnitionDir + "/nodes.yaml"
	IgnitionUnit       = "vipctl-bootstrap.service"
)

// IgnitionBGPSecretPath is where AddToIgnition puts the Secret manifest
// of a router's password (Options.BGPSecrets), named by the Secret.
func IgnitionBGPSecretPath(name string) string {
	return IgnitionDir + "/bgp-secret-" + name + ".yaml"
}

// AddToIgnition adds to ign, the installer's bootstrap.ign (any Ignition
// 3.x config), what runs `vipctl bootstrap` on the bootstrap machine
// itself: o's cluster file and node list under IgnitionDir and the
// enabled unit IgnitionUnit, which runs it in the cluster's vipctl image
// (spec.images.vipctl) with podman; with a routed API VIP, the Secret
// manifests of o.BGPSecrets too (bootstrap.ign already holds the
// cluster's keys and pull secret: it is as secret as they are). The inputs are checked as a run
// checks them before they are added. What an earlier call added is
// replaced, so running it again after an edit is safe; everything else
// of ign is kept. The result is checked by Ignition's own parser.
// installConfig, when not empty, is the install-config.yaml the bootstrap
// machine comes from: its bootstrapExternalStaticIP must be one of
// spec.bootstrap.addresses.
func AddToIgnition(ign []byte, o Options, installConfig string) ([]byte, error) {
	in, err := readInputs(o)
	if err != nil {
		return nil, err
	}
	c := in.c
	if installConfig != "" {
		f, err := nodelist.ReadInstaller(nodelist.Installer{InstallConfig: installConfig})
		if err != nil {
			return nil, err
		}
		if err := bootstrapMachineNamed(c, o.Config, f); err != nil {
			return nil, err
		}
	}
	config, err := os.ReadFile(o.Config)
	if err != nil {
		return nil, err
	}
	nodes, err := os.ReadFile(o.Nodes)
	if err != nil {
		return nil, err
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(ign, &doc); err != nil {
		return nil, fmt.Errorf("not an Ignition config: %w", err)
	}
	var meta struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(doc["ignition"], &meta); err != nil || !strings.HasPrefix(meta.Version, "3.") {
		return nil, fmt.Errorf("ignition.version %q: want an Ignition 3.x config (openshift-install's bootstrap.ign is 3.2.0)", meta.Version)
	}
	files := []any{ignitionFile(IgnitionConfigPath, config), ignitionFile(IgnitionNodesPath, nodes)}
	var secrets []string
	// readInputs has checked them: one file for each Secret the host needs.
	for _, name := range slices.Sorted(maps.Keys(in.secretFiles)) {
		data, err := os.ReadFile(in.secretFiles[name])
		if err != nil {
			return nil, err
		}
		path := IgnitionBGPSecretPath(name)
		files = append(files, ignitionFile(path, data))
		secrets = append(secrets, strings.Replace(path, IgnitionDir, "/vipctl", 1))
	}
	if doc["storage"], err = replaceEntries(doc["storage"], "files", "path", files); err != nil {
		return nil, fmt.Errorf("storage.files: %w", err)
	}
	unit := map[string]any{"name": IgnitionUnit, "enabled": true, "contents": ignitionUnitText(c.Spec.Images.Vipctl, secrets)}
	if doc["systemd"], err = replaceEntries(doc["systemd"], "units", "name", []any{unit}); err != nil {
		return nil, fmt.Errorf("systemd.units: %w", err)
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	if _, rpt, err := ignconfig.Parse(out); err != nil {
		return nil, fmt.Errorf("the Ignition config with vipctl's unit added does not parse: %w: %s", err, rpt.String())
	}
	return out, nil
}

// bootstrapMachineNamed refuses a cluster file whose spec.bootstrap does
// not name the installer-provisioned bootstrap VM f's install-config
// gives an address: the control-plane nodes would not accept the VM's VRRP
// adverts. Without that address (DHCP) it cannot tell.
func bootstrapMachineNamed(c *v1alpha1.ClusterVIPs, configPath string, f nodelist.InstallerFiles) error {
	if f.OnPrem == nil || f.OnPrem.BootstrapExternalStaticIP == "" {
		return nil
	}
	ip := f.OnPrem.BootstrapExternalStaticIP
	vm, err := netip.ParseAddr(ip)
	if err != nil {
		return fmt.Errorf("%s: %s.bootstrapExternalStaticIP: Invalid value: %q: not an IP address", f.InstallConfig, f.OnPrem.Field, ip)
	}
	for _, a := range c.Spec.Bootstrap.Addresses {
		if b, err := netip.ParseAddr(a); err == nil && b == vm {
			return nil
		}
	}
	return fmt.Errorf("%s: spec.bootstrap.addresses: Invalid value: [%s]: the bootstrap machine runs vipctl bootstrap itself, so they must name its address, %s.bootstrapExternalStaticIP %s of %s",
		configPath, strings.Join(c.Spec.Bootstrap.Addresses, ", "), f.OnPrem.Field, ip, f.InstallConfig)
}

// ignitionFile is a root-only file of the bootstrap machine (the cluster
// file may name Secrets, the node list addresses).
func ignitionFile(path string, data []byte) map[string]any {
	return map[string]any{
		"path":      path,
		"mode":      0o600,
		"overwrite": true,
		"contents":  map[string]any{"source": "data:;base64," + base64.StdEncoding.EncodeToString(data)},
	}
}

// ignitionUnitText is the unit that runs `vipctl bootstrap` in image on
// the bootstrap machine, as docs/bootstrap.md has an administrator run it
// by hand: root in the host's network namespace, the inputs mounted, the
// pull secret the installer writes there for its own images. It starts
// with the network and runs until the control-plane nodes hold the VIP
// (exit 0); a failure is tried again.
func ignitionUnitText(image string, secrets []string) string {
	args := ""
	for _, s := range secrets {
		args += " --bgp-secret " + s
	}
	return `[Unit]
Description=vipctl holds the API VIP until the control-plane nodes answer (vipctl bootstrap)
Documentation=https://github.com/vipctl/vipctl/blob/` + version.Release() + `/docs/bootstrap.md
Wants=network-online.target
After=network-online.target

[Service]
Type=simple
ExecStartPre=-/usr/bin/podman rm --force --ignore vipctl-bootstrap
ExecStart=/usr/bin/podman run --rm --name vipctl-bootstrap --net=host --privileged --user 0 --authfile /root/.docker/config.json -v ` + IgnitionDir + `:/vipctl:z ` + image + ` vipctl bootstrap -f /vipctl/cluster.yaml --nodes /vipctl/nodes.yaml` + args + `
Restart=on-failure
RestartSec=10

[Install]
WantedBy=multi-user.target
`
}

// replaceEntries sets list (an array of objects, each named by key) of
// the object raw to its entries without those named as one of add, then
// add; the object's other members are kept.
func replaceEntries(raw json.RawMessage, list, key string, add []any) (json.RawMessage, error) {
	obj := map[string]json.RawMessage{}
	if len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &obj); err != nil {
			return nil, err
		}
	}
	var entries []map[string]any
	if l, ok := obj[list]; ok && string(l) != "null" {
		if err := json.Unmarshal(l, &entries); err != nil {
			return nil, err
		}
	}
	var names []any
	for _, a := range add {
		names = append(names, a.(map[string]any)[key])
	}
	var out []any
	for _, e := range entries {
		if !slices.Contains(names, e[key]) {
			out = append(out, e)
		}
	}
	var err error
	obj[list], err = json.Marshal(append(out, add...))
	if err != nil {
		return nil, err
	}
	return json.Marshal(obj)
}
