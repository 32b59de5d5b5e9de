package runtimecfg

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/host"
	"github.com/vipctl/vipctl/pkg/onnode"
)

// The run files are keepalived's track files and the sidecar's marks
// under onnode.RunDir: small flags the daemons read, written only here
// (and the drain file by the data plane's Drain and Undrain).

// InitRunFiles creates the track files keepalived reads, without
// overwriting what a running sidecar already wrote: no drain, and the
// default IngressController counted ready (its VIP must work before the API
// does; its router health check still guards it) while other controllers
// wait for the sidecar to see their routers.
func InitRunFiles(t host.Target, c *v1alpha1.ClusterVIPs) error {
	if err := os.MkdirAll(t.Path(onnode.RunDir), 0o755); err != nil {
		return err
	}
	init := map[string]string{onnode.DrainFile: "0"}
	for _, in := range c.Spec.Ingress {
		v := "1"
		if in.Name == v1alpha1.DefaultIngressController {
			v = "0"
		}
		init[onnode.IngressStatusFile(in.Name)] = v
	}
	if err := endStepDowns(t); err != nil {
		return err
	}
	for p, v := range init {
		f, err := os.OpenFile(t.Path(p), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return err
		}
		_, werr := f.WriteString(v + "\n")
		if err := errors.Join(werr, f.Close()); err != nil {
			return err
		}
	}
	return nil
}

// endStepDowns writes 0 to every instance's onnode.UnheardFile on the
// node: a step-down (pkg/sidecar/heal.go) is the running sidecar's, whose
// hold ends with it, and one a previous pod left would otherwise last
// for good. Before keepalived starts (the init container) and as the
// sidecar starts.
func endStepDowns(t host.Target) error {
	found, err := filepath.Glob(t.Path(onnode.UnheardGlob))
	if err != nil {
		return err
	}
	prefix := strings.TrimSuffix(filepath.Base(onnode.UnheardGlob), "*")
	for _, f := range found {
		if err := t.WriteFlag(onnode.UnheardFile(strings.TrimPrefix(filepath.Base(f), prefix)), false); err != nil {
			return err
		}
	}
	return nil
}

// SetIngressReady records whether a ready router pod of the controller
// runs on this node.
func SetIngressReady(t host.Target, controller string, ready bool) error {
	// The file holds 0 for ready: keepalived treats non-zero as a fault.
	return t.WriteFlag(onnode.IngressStatusFile(controller), !ready)
}

// PruneLocalStatus removes the status files of Local Services that are no
// longer in keep, and those an earlier build wrote under another name.
// Call it only once the keepalived.conf that tracked them has been
// replaced: until then keepalived still reads them.
func PruneLocalStatus(t host.Target, keep []cluster.LocalService) error {
	want := make(map[string]bool, len(keep))
	for _, ls := range keep {
		want[t.Path(onnode.LocalServiceStatusFile(ls.Name))] = true
	}
	found, err := filepath.Glob(t.Path(onnode.LocalServiceStatusFile("*")))
	if err != nil {
		return err
	}
	legacy, err := filepath.Glob(t.Path(onnode.LegacyLocalStatusGlob))
	if err != nil {
		return err
	}
	found = append(found, legacy...)
	for _, f := range found {
		if !want[f] {
			if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	return nil
}
