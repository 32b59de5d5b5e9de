package cli

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/manifests"
)

// TestStaticPodArgsParse runs every vipctl command line the static pods
// carry through the real command tree: a renamed or removed flag, or a
// value a flag refuses, fails here rather than as a crash-looping pod.
func TestStaticPodArgsParse(t *testing.T) {
	t.Parallel()
	c, err := v1alpha1.Load(repo("examples/compact-ipv4.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var containers []corev1.Container
	for _, p := range []*corev1.Pod{manifests.KeepalivedPod(c), manifests.HaproxyPod(c)} {
		containers = append(containers, p.Spec.InitContainers...)
		containers = append(containers, p.Spec.Containers...)
	}
	checked := 0
	for _, ct := range containers {
		if len(ct.Command) == 0 || ct.Command[0] != "vipctl" {
			continue
		}
		checked++
		root := NewRootCommand(IOStreams{In: strings.NewReader(""), Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}})
		args := slices.Concat(ct.Command[1:], ct.Args)
		cmd, rest, err := root.Find(args)
		if err != nil || cmd == root {
			t.Errorf("container %s: %q names no command: %v", ct.Name, args, err)
			continue
		}
		if err := cmd.ParseFlags(rest); err != nil {
			t.Errorf("container %s: %q: %v", ct.Name, args, err)
			continue
		}
		if err := cmd.ValidateArgs(cmd.Flags().Args()); err != nil {
			t.Errorf("container %s: %q: %v", ct.Name, args, err)
		}
	}
	if checked < 3 {
		t.Errorf("checked %d vipctl containers, want the sidecar and both render init containers", checked)
	}
	// The test can fail: a flag the command does not have is refused.
	root := NewRootCommand(IOStreams{In: strings.NewReader(""), Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}})
	cmd, rest, _ := root.Find([]string{"runtimecfg", "--no-such-flag"})
	if err := cmd.ParseFlags(rest); err == nil {
		t.Error("an unknown flag parsed")
	}
}
