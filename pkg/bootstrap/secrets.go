package bootstrap

import (
	"fmt"
	"os"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/onnode"
)

// bgpPasswords are the session passwords of the routers the bootstrap
// host peers with (a routed API VIP: the peers spec.bootstrap.labels
// select), by passwordSecret, read from files: Secret manifests, the
// ones the admin adds to the installer's manifests so that the cluster
// has them from its start, each the Secret in vipctl-system the nodes'
// sidecars read later (docs/bgp.md, "Session passwords"). There is no
// cluster to read them from yet. It refuses a peer the host peers with
// whose Secret is not among files, and a file that is not such a
// Secret, or one no such peer names; never saying a password. from says
// which file each came from.
func bgpPasswords(c *v1alpha1.ClusterVIPs, files []string) (passwords, from map[string]string, err error) {
	wanted := bootstrapPasswordSecrets(c)
	if len(files) > 0 && len(wanted) == 0 {
		return nil, nil, fmt.Errorf("--bgp-secret %s: the bootstrap host peers with no router that has a passwordSecret (spec.api.routed, spec.bootstrap.labels)", files[0])
	}
	passwords, from = map[string]string{}, map[string]string{}
	for _, f := range files {
		name, pw, err := readBGPSecret(f)
		if err != nil {
			return nil, nil, fmt.Errorf("--bgp-secret %s: %w", f, err)
		}
		if _, ok := wanted[name]; !ok {
			return nil, nil, fmt.Errorf("--bgp-secret %s: Secret %s is the passwordSecret of no peer the bootstrap host peers with (%s)", f, name, strings.Join(secretNames(wanted), ", "))
		}
		if _, dup := passwords[name]; dup {
			return nil, nil, fmt.Errorf("--bgp-secret %s: Secret %s given twice (%s too)", f, name, from[name])
		}
		passwords[name], from[name] = pw, f
	}
	for _, name := range secretNames(wanted) {
		if _, ok := passwords[name]; !ok {
			return nil, nil, fmt.Errorf("%s %s: the bootstrap host peers with this router (spec.bootstrap.labels) and needs its password before the cluster exists: give the Secret's manifest, the one added to the installer's manifests, with --bgp-secret FILE", wanted[name], name)
		}
	}
	return passwords, from, nil
}

// bootstrapPasswordSecrets are the passwordSecrets of the peers the
// bootstrap host peers with, each with the path of the first peer that
// names it.
func bootstrapPasswordSecrets(c *v1alpha1.ClusterVIPs) map[string]*field.Path {
	out := map[string]*field.Path{}
	if !c.Spec.API.Routed || c.Spec.Bootstrap == nil || c.Spec.BGP == nil {
		return out
	}
	labels := c.Spec.Bootstrap.BootstrapLabels()
	for i, peer := range c.Spec.BGP.Peers {
		if _, seen := out[peer.PasswordSecret]; peer.PasswordSecret == "" || seen || !v1alpha1.Matches(peer.NodeSelector, labels) {
			continue
		}
		out[peer.PasswordSecret] = field.NewPath("spec", "bgp", "peers").Index(i).Child("passwordSecret")
	}
	return out
}

func secretNames(m map[string]*field.Path) []string {
	var out []string
	for name := range m {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// readBGPSecret reads a Secret manifest (YAML or JSON) in vipctl-system
// and returns its name and password (key "password" of data, or of
// stringData, which wins as the apiserver has it).
func readBGPSecret(path string) (name, password string, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", "", err
	}
	var s corev1.Secret
	if err := yaml.UnmarshalStrict(data, &s); err != nil {
		return "", "", fmt.Errorf("not a Secret manifest: %w", err)
	}
	switch {
	case s.APIVersion != "v1" || s.Kind != "Secret":
		return "", "", fmt.Errorf("apiVersion %q, kind %q: want v1, Secret", s.APIVersion, s.Kind)
	case s.Name == "":
		return "", "", fmt.Errorf("metadata.name: Required value: the passwordSecret it is")
	case s.Namespace != onnode.Namespace:
		return "", "", fmt.Errorf("metadata.namespace %q of Secret %s: want %s, where the nodes' sidecars read it once the cluster runs", s.Namespace, s.Name, onnode.Namespace)
	}
	pw, ok := s.Data[v1alpha1.BGPPasswordKey]
	if v, in := s.StringData[v1alpha1.BGPPasswordKey]; in {
		pw, ok = []byte(v), true
	}
	if !ok {
		return "", "", fmt.Errorf("no key %s in the data or stringData of Secret %s", v1alpha1.BGPPasswordKey, s.Name)
	}
	if why := v1alpha1.CheckBGPPassword(pw); why != "" {
		return "", "", fmt.Errorf("key %s of Secret %s: %s", v1alpha1.BGPPasswordKey, s.Name, why)
	}
	return s.Name, string(pw), nil
}
