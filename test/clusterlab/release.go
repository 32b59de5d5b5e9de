package clusterlab

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/vipctl/vipctl/pkg/bundle"
	"github.com/vipctl/vipctl/test/fixture"
	"github.com/vipctl/vipctl/test/kubeletlab"
	"github.com/vipctl/vipctl/test/lab"
	"github.com/vipctl/vipctl/test/testapiserver"
)

// Release is a vipctl the lab installs or moves to: its binary (what an
// administrator renders, updates and asks with) and its image archive.
type Release struct {
	// Name says which one, in logs: "this tree" or a version.
	Name   string
	Vipctl string
	Image  string
}

// ThisTree is the release this tree builds: bin/vipctl and make image's
// bin/vipctl-image.tar.
func ThisTree(bin string) Release {
	return Release{Name: "this tree", Vipctl: filepath.Join(bin, "vipctl"), Image: filepath.Join(bin, "vipctl-image.tar")}
}

// PreviousRelease is the release this tree follows (the newest
// hack/releases.txt records), its vipctl and image built from this clone's
// git history by its own make targets (hack/build-previous-image.sh;
// cached: seconds after the first time).
func PreviousRelease(t testing.TB) Release {
	t.Helper()
	root := filepath.Dir(kubeletlab.BinDir(t))
	cmd := exec.Command(filepath.Join(root, "hack", "build-previous-image.sh"))
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hack/build-previous-image.sh: %v\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	image := lines[len(lines)-1]
	version, err := os.ReadFile(filepath.Join(filepath.Dir(image), "vipctl.version"))
	if err != nil {
		t.Fatal(err)
	}
	return Release{Name: strings.TrimSpace(string(version)), Vipctl: filepath.Join(filepath.Dir(image), "vipctl"), Image: image}
}

var machineConfigGVR = schema.GroupVersionResource{Group: "machineconfiguration.openshift.io", Version: "v1", Resource: "machineconfigs"}

// installOpenShiftAPIs installs what `vipctl update` writes to and reads
// beside the core API on OpenShift: the MachineConfig CRD (the lab plays
// the machine-config operator from what the API holds: Upgrade) and the
// ClusterVersion, at the cluster file's release.
func (c *Cluster) installOpenShiftAPIs(t testing.TB) {
	t.Helper()
	testapiserver.InstallCRDsAt(t, c.AdminConfig, testapiserver.MachineConfigCRD(t), testapiserver.ClusterVersionCRD(t))
	testapiserver.SetClusterVersionAt(t, c.AdminConfig, OpenShiftVersion)
}

// OpenShiftVersion is what the lab's ClusterVersion says the cluster runs.
const OpenShiftVersion = "4.16.3"

// applyRendered applies what `vipctl render` wrote into out, as an
// installer or `oc apply -f` of its directories does: the manifests of
// manifests/vipctl.yaml (not monitoring.yaml: the lab runs no Prometheus
// operator) and the MachineConfigs, with first before them (the router
// pods' namespace, which the sidecars' RBAC names).
func (c *Cluster) applyRendered(t testing.TB, out string, first ...runtime.Object) {
	t.Helper()
	objs := append([]runtime.Object{}, first...)
	objs = append(objs, fixture.ReadObjects(t, filepath.Join(out, "manifests", "vipctl.yaml"))...)
	for _, role := range []string{RoleMaster, RoleWorker} {
		objs = append(objs, fixture.ReadObjects(t, filepath.Join(out, "machineconfigs", bundle.MachineConfigName(role)+".yaml"))...)
	}
	lab.ApplyObjectsWithin(t, c.AdminConfig, objs, 2*time.Minute)
}

// machineConfigFiles are each role's files as the MachineConfigs in the
// API hold them: what the machine-config daemon lays on a node.
func (c *Cluster) machineConfigFiles(t testing.TB) map[string][]kubeletlab.File {
	t.Helper()
	client, err := dynamic.NewForConfig(c.AdminConfig)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]kubeletlab.File{}
	for _, role := range []string{RoleMaster, RoleWorker} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		mc, err := client.Resource(machineConfigGVR).Get(ctx, bundle.MachineConfigName(role), metav1.GetOptions{})
		cancel()
		if err != nil {
			t.Fatalf("MachineConfig of %s: %v", role, err)
		}
		data, err := mc.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if files[role], err = kubeletlab.MachineConfigFiles(data); err != nil {
			t.Fatalf("MachineConfig %s: %v", mc.GetName(), err)
		}
	}
	return files
}

// String names the release.
func (r Release) String() string { return fmt.Sprintf("%s (%s)", r.Name, filepath.Base(r.Image)) }
