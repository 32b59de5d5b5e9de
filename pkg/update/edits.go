package update

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
)

// Edit is one quick edit from the command line.
type Edit struct {
	// Op is add, remove or set.
	Op string
	// Spec is NAME=CIDR|RANGE[,…] for add and set, NAME for remove.
	Spec string
}

// ApplyEdits changes c's pools and returns the result, defaulted and
// validated (errors carry field paths). c is not modified.
func ApplyEdits(c *v1alpha1.ClusterVIPs, edits []Edit) (*v1alpha1.ClusterVIPs, error) {
	out := *c
	out.Spec.ServicePools = append([]v1alpha1.ServicePool(nil), c.Spec.ServicePools...)
	find := func(name string) int {
		for i, p := range out.Spec.ServicePools {
			if p.Name == name {
				return i
			}
		}
		return -1
	}
	for _, e := range edits {
		flag := "--" + e.Op + "-pool"
		name, list, hasList := strings.Cut(e.Spec, "=")
		name = strings.TrimSpace(name)
		if name == "" {
			return nil, fmt.Errorf("%s %q: no pool name", flag, e.Spec)
		}
		var addrs []string
		if hasList {
			for _, a := range strings.Split(list, ",") {
				if a = strings.TrimSpace(a); a != "" {
					addrs = append(addrs, a)
				}
			}
		}
		switch e.Op {
		case "add":
			if !hasList || len(addrs) == 0 {
				return nil, fmt.Errorf("%s %q: want NAME=CIDR|RANGE[,...]", flag, e.Spec)
			}
			if find(name) >= 0 {
				return nil, fmt.Errorf("%s %q: pool %s exists (use --set-pool)", flag, e.Spec, name)
			}
			out.Spec.ServicePools = append(out.Spec.ServicePools, v1alpha1.ServicePool{Name: name, Addresses: addrs})
		case "set":
			i := find(name)
			if i < 0 {
				return nil, fmt.Errorf("%s %q: no pool %s", flag, e.Spec, name)
			}
			if !hasList || len(addrs) == 0 {
				return nil, fmt.Errorf("%s %q: want NAME=CIDR|RANGE[,...]", flag, e.Spec)
			}
			out.Spec.ServicePools[i].Addresses = addrs
		case "remove":
			i := find(name)
			if i < 0 || hasList {
				return nil, fmt.Errorf("%s %q: no pool %s", flag, e.Spec, name)
			}
			out.Spec.ServicePools = append(out.Spec.ServicePools[:i], out.Spec.ServicePools[i+1:]...)
		default:
			return nil, fmt.Errorf("unknown edit %q", e.Op)
		}
	}
	// A round trip through the decoder applies defaults and every
	// validation rule, with field paths.
	data, err := yaml.Marshal(&out)
	if err != nil {
		return nil, err
	}
	return v1alpha1.Parse(data)
}

// WriteFile rewrites the cluster file atomically (temp file + rename).
// Comments and key order of the original are not kept.
func WriteFile(path string, c *v1alpha1.ClusterVIPs) error {
	data, err := yaml.Marshal(c)
	if err != nil {
		return err
	}
	mode := os.FileMode(0o644)
	if st, err := os.Stat(path); err == nil {
		mode = st.Mode().Perm()
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
