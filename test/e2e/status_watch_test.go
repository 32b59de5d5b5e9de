package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/vipctl/vipctl/internal/cli"
	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/apis/v1alpha1/crd"
	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/pkg/status"
	"github.com/vipctl/vipctl/test/lab"
)

// watchDeadline is how long a test waits for a frame it expects: generous,
// since it bounds a wait and measures nothing.
const watchDeadline = 60 * time.Second

// streamed is a running `vipctl status --watch`: its stdout line by line.
type streamed struct {
	lines  chan string
	cancel context.CancelFunc
	code   chan int
	stderr *lab.LogBuffer
}

// watchStatus starts `vipctl status --watch ARGS` in process, as the
// binary would run, until stop.
func watchStatus(t *testing.T, args ...string) *streamed {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	s := &streamed{lines: make(chan string, 1000), cancel: cancel, code: make(chan int, 1), stderr: &lab.LogBuffer{}}
	go func() {
		code := cli.MainContext(ctx, append([]string{"status", "--watch"}, args...), cli.IOStreams{In: strings.NewReader(""), Out: pw, ErrOut: s.stderr})
		_ = pw.Close()
		s.code <- code
	}()
	go func() {
		defer close(s.lines)
		sc := bufio.NewScanner(pr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() { cancel(); _, _ = io.Copy(io.Discard, pr) })
	return s
}

// next is the next line of output; the test fails if none comes.
func (s *streamed) next(t *testing.T, what string) string {
	t.Helper()
	select {
	case l, ok := <-s.lines:
		if !ok {
			t.Fatalf("waiting for %s: the watch ended (exit %d)\nstderr:\n%s", what, <-s.code, s.errors())
		}
		return l
	case <-time.After(watchDeadline):
		t.Fatalf("waiting for %s: nothing within %s\nstderr:\n%s", what, watchDeadline, s.errors())
	}
	return ""
}

func (s *streamed) errors() string { return s.stderr.String() }

// stop interrupts the watch as Ctrl-C would and returns its exit code.
func (s *streamed) stop(t *testing.T) int {
	t.Helper()
	s.cancel()
	for range s.lines { // what was printed before the end
	}
	select {
	case c := <-s.code:
		return c
	case <-time.After(watchDeadline):
		t.Fatal("the watch did not end when its context did")
	}
	return -1
}

// TestStatusWatch: `vipctl status --watch` against the real apiserver
// prints the status once, then again each time a Node's published VIPs
// or the ConfigMap change what it shows, and not when a change shows
// nothing new (a label on the Node); -o json streams one object per line
// and change; it ends with exit 0 when interrupted; on a migrated
// cluster it follows the ClusterVIPs object and shows its verdict.
func TestStatusWatch(t *testing.T) {
	t.Parallel() // apiserver only: see doc.go
	base := clusterYAML("fast", "unicast", updateBase)
	e := startAllocEnv(t, base)
	kubeconfig, _ := updateFiles(t, e.api, base)
	ctx := context.Background()
	if _, err := e.admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "master-0"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	since := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	cfg, err := v1alpha1.Parse([]byte(base))
	if err != nil {
		t.Fatal(err)
	}
	// As a sidecar of this release publishes: what it holds, and the
	// config it runs (without it, master-0 would be a sidecar older than
	// v0.2.0, which `vipctl migrate` refuses to leave behind).
	applied := v1alpha1.AppliedConfig{Digest: v1alpha1.SpecDigest(cfg.Metadata.Name, cfg.Spec), Source: v1alpha1.SourceConfigMap}.String()
	publish := func(t *testing.T, vips ...string) {
		t.Helper()
		var held v1alpha1.HeldVIPs
		for _, v := range vips {
			held = append(held, v1alpha1.HeldVIP{Address: v, Instance: "api", Since: since})
		}
		patchNode(t, e, map[string]any{"metadata": map[string]any{"annotations": map[string]string{
			v1alpha1.AnnotationNodeVIPs: held.String(), v1alpha1.AnnotationNodeConfig: applied,
		}}})
	}
	label := func(t *testing.T, v string) {
		t.Helper()
		patchNode(t, e, map[string]any{"metadata": map[string]any{"labels": map[string]string{"example.test/unrelated": v}}})
	}

	t.Run("json", func(t *testing.T) {
		publish(t, "198.51.100.99") // an address that is no VIP: the API VIP has no holder
		w := watchStatus(t, "--kubeconfig", kubeconfig, "-o", "json")
		frame := func(what string) status.Report {
			t.Helper()
			line := w.next(t, what)
			var r status.Report
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("%s: not one JSON object per line: %v\n%s", what, err, line)
			}
			return r
		}
		if r := frame("the first frame"); apiRow(t, r).State != status.StateNoHolder {
			t.Fatalf("first frame: %+v", r)
		}
		// A change the table does not show, then one it does: the next
		// object is the second (the first printed nothing).
		label(t, "1")
		publish(t, apiVIP)
		r := frame("the API VIP held")
		if row := apiRow(t, r); row.State != status.StateOK || strings.Join(row.Holders, ",") != "master-0" || !row.Since.Equal(since) {
			t.Fatalf("after master-0 published the API VIP: %+v", row)
		}
		// The ConfigMap gains an ingress VIP: a row of its own.
		cm, err := e.admin.CoreV1().ConfigMaps(onnode.Namespace).Get(ctx, v1alpha1.ConfigMapName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm.Data[v1alpha1.ConfigMapKey] = strings.Replace(base, "  vrrp:", "  ingress: [{name: default, vips: [198.51.100.6]}]\n  vrrp:", 1)
		if _, err := e.admin.CoreV1().ConfigMaps(onnode.Namespace).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		r = frame("the ingress VIP's row")
		if len(r.VIPs) != 2 || r.VIPs[1].Address != "198.51.100.6" || r.VIPs[1].State != status.StateNoHolder {
			t.Fatalf("after the ingress VIP was added: %+v", r.VIPs)
		}
		if code := w.stop(t); code != 0 {
			t.Errorf("interrupted: exit %d, want 0\nstderr:\n%s", code, w.errors())
		}
	})

	t.Run("text", func(t *testing.T) {
		publish(t)
		w := watchStatus(t, "--kubeconfig", kubeconfig)
		stamp := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`)
		// frameText reads one frame: its time line (after a blank line
		// from the second on), then the lines up to
		// the problems line (every frame here has a VIP without holder).
		frameText := func(what string) string {
			t.Helper()
			l := w.next(t, what)
			if l == "" { // between two frames
				l = w.next(t, what)
			}
			if !stamp.MatchString(l) {
				t.Fatalf("%s: a frame starts with %q, want its time", what, l)
			}
			var b strings.Builder
			for {
				l := w.next(t, what)
				b.WriteString(l + "\n")
				if strings.HasPrefix(l, "problems: ") {
					return b.String()
				}
			}
		}
		held := regexp.MustCompile(`(?m)^api +198\.51\.100\.5 +master-0 +ok +2026-11-25T10:00:00Z`)
		if f := frameText("the first table"); !strings.Contains(f, "INSTANCE") || held.MatchString(f) {
			t.Fatalf("first table:\n%s", f)
		}
		label(t, "2")
		publish(t, apiVIP)
		if f := frameText("the table with the API VIP held"); !held.MatchString(f) {
			t.Fatalf("after master-0 published the API VIP:\n%s", f)
		}
		if code := w.stop(t); code != 0 {
			t.Errorf("interrupted: exit %d, want 0\nstderr:\n%s", code, w.errors())
		}
	})

	// Migrated (docs/migrate.md): each frame carries the object's
	// verdict, and the watch reads the config from the object, so an
	// `oc edit cvips` (the ConfigMap left as it was) shows.
	t.Run("object", func(t *testing.T) {
		if code, out, errOut := vipctl(t, "migrate", "--kubeconfig", kubeconfig, "--wait", "0s"); code != 0 {
			t.Fatalf("migrate: exit %d\n%s%s", code, out, errOut)
		}
		w := watchStatus(t, "--kubeconfig", kubeconfig, "-o", "json")
		frame := func(what string) status.Report {
			t.Helper()
			var r status.Report
			if err := json.Unmarshal([]byte(w.next(t, what)), &r); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			return r
		}
		if r := frame("the first frame"); r.Object == nil || r.Object.Name != "lab" || r.Object.Generation != 1 {
			t.Fatalf("first frame on a migrated cluster: object %+v, want lab's verdict", r.Object)
		}
		if _, err := dynamic.NewForConfigOrDie(e.api.AdminConfig()).Resource(crd.Resource).Patch(ctx, "lab", types.JSONPatchType,
			[]byte(`[{"op":"replace","path":"/spec/ingress/0/vips/0","value":"198.51.100.7"}]`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		r := frame("the object's new ingress VIP")
		if len(r.VIPs) != 2 || r.VIPs[1].Address != "198.51.100.7" || r.Object == nil || r.Object.Generation != 2 {
			t.Fatalf("after the object's ingress VIP changed: rows %+v, object %+v", r.VIPs, r.Object)
		}
		if code := w.stop(t); code != 0 {
			t.Errorf("interrupted: exit %d, want 0\nstderr:\n%s", code, w.errors())
		}
	})
}

func apiRow(t *testing.T, r status.Report) status.VIPStatus {
	t.Helper()
	for _, v := range r.VIPs {
		if v.Address == apiVIP {
			return v
		}
	}
	t.Fatalf("no row for the API VIP: %+v", r)
	return status.VIPStatus{}
}

func patchNode(t *testing.T, e *allocEnv, patch map[string]any) {
	t.Helper()
	b, err := json.Marshal(patch)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.CoreV1().Nodes().Patch(context.Background(), "master-0", types.MergePatchType, b, metav1.PatchOptions{}); err != nil {
		t.Fatal(fmt.Errorf("patching master-0: %w", err))
	}
}
