package update

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
)

// Edit is one quick edit from the command line.
type Edit struct {
	// Op is add, remove, set (addresses) or mode.
	Op string
	// Spec is NAME=CIDR|RANGE[,…] for add and set, NAME for remove,
	// NAME=vrrp|bgp for mode.
	Spec string
}

// flag is the command-line flag that makes the edit.
func (e Edit) flag() string {
	if e.Op == "mode" {
		return "--set-pool-mode"
	}
	return "--" + e.Op + "-pool"
}

// ApplyEdits applies the quick edits to the text of a cluster file and
// returns the new text with the config it holds, defaulted and validated
// (errors carry field paths). The text is edited in place, guided by the
// YAML node tree, so that only the lines an edit concerns change: the
// user's comments, key order and layout stay. original is not modified.
func ApplyEdits(original []byte, edits []Edit) ([]byte, *v1alpha1.ClusterVIPs, error) {
	data := original
	for _, e := range edits {
		var err error
		if data, err = applyEdit(data, e); err != nil {
			return nil, nil, err
		}
	}
	c, err := v1alpha1.Parse(data)
	if err != nil {
		return nil, nil, err
	}
	return data, c, nil
}

func applyEdit(data []byte, e Edit) ([]byte, error) {
	flag := e.flag()
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
	f, err := parseFile(data)
	if err != nil {
		return nil, err
	}
	pool := f.pool(name)
	switch e.Op {
	case "add":
		if !hasList || len(addrs) == 0 {
			return nil, fmt.Errorf("%s %q: want NAME=CIDR|RANGE[,...]", flag, e.Spec)
		}
		if pool != nil {
			return nil, fmt.Errorf("%s %q: pool %s exists (use --set-pool)", flag, e.Spec, name)
		}
		return f.addPool(name, addrs), nil
	case "set":
		if pool == nil {
			return nil, fmt.Errorf("%s %q: no pool %s", flag, e.Spec, name)
		}
		if !hasList || len(addrs) == 0 {
			return nil, fmt.Errorf("%s %q: want NAME=CIDR|RANGE[,...]", flag, e.Spec)
		}
		return f.setAddresses(pool, addrs)
	case "mode":
		if pool == nil {
			return nil, fmt.Errorf("%s %q: no pool %s", flag, e.Spec, name)
		}
		if len(addrs) != 1 {
			return nil, fmt.Errorf("%s %q: want NAME=%s|%s", flag, e.Spec, v1alpha1.PoolModeVRRP, v1alpha1.PoolModeBGP)
		}
		return f.setMode(pool, addrs[0]), nil
	case "remove":
		if pool == nil || hasList {
			return nil, fmt.Errorf("%s %q: no pool %s", flag, e.Spec, name)
		}
		return f.removePool(pool), nil
	default:
		return nil, fmt.Errorf("unknown edit %q", e.Op)
	}
}

// WriteFile replaces the cluster file atomically (temp file + rename),
// keeping its mode and owner. A symbolic link is followed: the file it
// points to is replaced and the link stays (a rename over the link would
// put a copy in its place and leave the file it named behind).
func WriteFile(path string, data []byte) error {
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	mode := os.FileMode(0o644)
	uid, gid := -1, -1
	if st, err := os.Stat(path); err == nil {
		mode = st.Mode().Perm()
		if sys, ok := st.Sys().(*syscall.Stat_t); ok {
			uid, gid = int(sys.Uid), int(sys.Gid)
		}
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
	if st, err := tmp.Stat(); err == nil && uid >= 0 {
		if sys, ok := st.Sys().(*syscall.Stat_t); ok && (int(sys.Uid) != uid || int(sys.Gid) != gid) {
			if err := tmp.Chown(uid, gid); err != nil {
				_ = tmp.Close()
				return fmt.Errorf("%s belongs to uid %d gid %d, which its new version cannot be given (%w): run as that user", path, uid, gid, err)
			}
		}
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
