package runtimecfg

import (
	"encoding/json"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/host"
	"github.com/vipctl/vipctl/pkg/onnode"
)

// TestBootInputLastGoodFromNewer: a last-good view a newer vipctl wrote
// (before a rollback) is still the view the node boots from: the fields
// of its config this vipctl does not know are named in a warning and
// ignored, its Service addresses kept. A field of the wrong kind is no
// newer release's: that view is ignored, as an unreadable one always was.
func TestBootInputLastGoodFromNewer(t *testing.T) {
	static, err := v1alpha1.Load("../../examples/compact-ipv4.yaml")
	if err != nil {
		t.Fatal(err)
	}
	st := cluster.State{
		Nodes:       []cluster.Node{{Name: "master-0", Addresses: []netip.Addr{netip.MustParseAddr("198.51.100.11")}}},
		ServiceVIPs: map[string][]netip.Addr{"general": {netip.MustParseAddr("198.51.100.130")}},
	}
	for _, tc := range []struct {
		name     string
		edit     func(spec map[string]any)
		warnings []string
		from     string // "": the bootstrap node list
	}{
		{"as this vipctl writes it", func(map[string]any) {}, nil, onnode.LastGoodPath},
		{"a newer vipctl's fields", func(spec map[string]any) {
			spec["futureSection"] = map[string]any{"on": true}
			spec["servicePools"].([]any)[0].(map[string]any)["futureKnob"] = 1
		}, []string{onnode.LastGoodPath + ": config: fields this vipctl does not know (written by a newer one), ignored: spec.futureSection, spec.servicePools[0].futureKnob"}, onnode.LastGoodPath},
		{"a known field of the wrong kind", func(spec map[string]any) {
			spec["servicePools"].([]any)[0].(map[string]any)["instances"] = "two"
		}, []string{"ignoring the last-good view: " + onnode.LastGoodPath + ": config: 1 invalid field(s):\n  spec.servicePools[0].instances: Invalid value: \"two\": must be a whole number, not a string"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target := host.Target{Root: t.TempDir()}
			if _, err := SaveLastGood(target, "master-0", static, st); err != nil {
				t.Fatal(err)
			}
			editLastGood(t, target, tc.edit)
			// A bootstrap list older than the view: the view wins.
			nodes, err := os.ReadFile("../../examples/nodes/compact.yaml")
			if err != nil {
				t.Fatal(err)
			}
			o := OnceOptions{Target: target, BootstrapNodes: filepath.Join(t.TempDir(), "nodes.yaml"), NodeName: "master-0"}
			if err := os.WriteFile(o.BootstrapNodes, nodes, 0o600); err != nil {
				t.Fatal(err)
			}
			old := mustStat(t, target.Path(onnode.LastGoodPath)).ModTime().Add(-time.Hour)
			if err := os.Chtimes(o.BootstrapNodes, old, old); err != nil {
				t.Fatal(err)
			}
			if tc.from == "" {
				tc.from = o.BootstrapNodes
			}
			in, err := BootInput(o, static)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(in.Warnings, tc.warnings) {
				t.Errorf("warnings %q\nwant %q", in.Warnings, tc.warnings)
			}
			if in.From != tc.from {
				t.Errorf("from %s, want %s", in.From, tc.from)
			}
			if got := in.State.ServiceVIPs["general"]; tc.from == onnode.LastGoodPath && !slices.Equal(got, st.ServiceVIPs["general"]) {
				t.Errorf("Service addresses %v, want the view's %v", got, st.ServiceVIPs["general"])
			}
		})
	}
}

// editLastGood changes the spec of the config in the recorded view.
func editLastGood(t *testing.T, target host.Target, edit func(spec map[string]any)) {
	t.Helper()
	path := target.Path(onnode.LastGoodPath)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var lg map[string]any
	if err := json.Unmarshal(data, &lg); err != nil {
		t.Fatal(err)
	}
	edit(lg["config"].(map[string]any)["spec"].(map[string]any))
	if data, err = json.Marshal(lg); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func mustStat(t *testing.T, path string) os.FileInfo {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi
}

// TestOnceStaticFileFromNewer: the cluster.yaml a newer vipctl's
// MachineConfig laid down (a rollback whose pod starts before its file is
// back) still starts the node: the fields this vipctl does not know are
// the first warning, and nothing else changes.
func TestOnceStaticFileFromNewer(t *testing.T) {
	c, err := v1alpha1.Load("../../examples/compact-ipv4.yaml")
	if err != nil {
		t.Fatal(err)
	}
	data, err := c.ShippedYAML()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "cluster.yaml")
	if err := os.WriteFile(file, append(data, "status:\n  futureField: 1\n"...), 0o600); err != nil {
		t.Fatal(err)
	}
	target := host.Target{Root: nodeRoot(t)}
	res, err := Once(t.Context(), OnceOptions{Target: target, Config: file,
		BootstrapNodes: filepath.Join(t.TempDir(), "missing.yaml"), NodeName: "master-0"})
	if !errors.Is(err, ErrNoBootstrapNodes) {
		t.Fatalf("err = %v, want ErrNoBootstrapNodes", err)
	}
	if want := []string{file + ": fields this vipctl does not know (written by a newer one), ignored: status"}; !slices.Equal(res.Warnings, want) {
		t.Errorf("warnings %q\nwant %q", res.Warnings, want)
	}
}
