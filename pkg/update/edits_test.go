package update

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pmezard/go-difflib/difflib"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/test/golden"
)

func readEditsFixture(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "edits", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestEditsGolden pins, as a diff against the user's file, what each quick
// edit changes in files of several styles: only the lines the edit is
// about, with everything else (comments, blank lines, flow or block style,
// indentation) as it was.
func TestEditsGolden(t *testing.T) {
	t.Parallel()
	add := Edit{Op: "add", Spec: "extra=198.51.100.64/27, 198.51.100.96/28"}
	cases := []struct {
		file, name string
		edits      []Edit
	}{
		{"commented", "add", []Edit{add}},
		{"commented", "set", []Edit{{Op: "set", Spec: "rack-a=198.51.100.128/25"}}},
		{"commented", "set-commented-list", []Edit{{Op: "set", Spec: "edge=203.0.113.64/28,203.0.113.96/28"}}},
		{"commented", "remove-first", []Edit{{Op: "remove", Spec: "rack-a"}}},
		{"commented", "remove-last", []Edit{{Op: "remove", Spec: "edge"}}},
		{"commented", "remove-all-then-add", []Edit{{Op: "remove", Spec: "edge"}, {Op: "remove", Spec: "rack-a"}, add}},
		{"commented", "add-yaml-1.1-bool", []Edit{{Op: "add", Spec: "on=198.51.100.64/27"}}},
		{"commented", "add-set-remove", []Edit{add, {Op: "set", Spec: "extra=198.51.100.64/26"}, {Op: "remove", Spec: "rack-a"}}},
		{"flow", "add", []Edit{add}},
		{"flow", "set", []Edit{{Op: "set", Spec: "edge=203.0.113.64/28"}}},
		{"flow", "remove-first", []Edit{{Op: "remove", Spec: "rack-a"}}},
		{"flow", "remove-last", []Edit{{Op: "remove", Spec: "edge"}}},
		{"flow", "remove-all-then-add", []Edit{{Op: "remove", Spec: "rack-a"}, {Op: "remove", Spec: "edge"}, add}},
		{"odd-indent", "add", []Edit{add}},
		{"odd-indent", "set", []Edit{{Op: "set", Spec: "rack-a=198.51.100.128/25"}}},
		{"odd-indent", "set-flow-item", []Edit{{Op: "set", Spec: "edge=203.0.113.64/28"}}},
		{"odd-indent", "remove-flow-item", []Edit{{Op: "remove", Spec: "edge"}}},
		{"no-pools", "add", []Edit{add}},
		{"flow-spec", "add", []Edit{add}},
		{"bgp", "mode-replace", []Edit{{Op: "mode", Spec: "web=bgp"}}},
		{"bgp", "mode-insert", []Edit{{Op: "mode", Spec: "spare=bgp"}}},
		{"bgp", "mode-replace-flow-item", []Edit{{Op: "mode", Spec: "edge=bgp"}}},
		{"bgp", "mode-insert-flow-item", []Edit{{Op: "mode", Spec: "lab=bgp"}}},
		{"bgp", "mode-back-and-forth", []Edit{{Op: "mode", Spec: "web=bgp"}, {Op: "mode", Spec: "web=vrrp"}}},
		{"flow", "mode-insert", []Edit{{Op: "mode", Spec: "edge=vrrp"}}},
		{"odd-indent", "mode-insert", []Edit{{Op: "mode", Spec: "rack-a=vrrp"}}},
	}
	for _, tc := range cases {
		t.Run(tc.file+"-"+tc.name, func(t *testing.T) {
			t.Parallel()
			original := readEditsFixture(t, tc.file)
			got, c, err := ApplyEdits(original, tc.edits)
			if err != nil {
				t.Fatal(err)
			}
			// The text edit means what the edit says: the same config as
			// editing the decoded struct.
			if want := editStruct(t, original, tc.edits); jsonOf(t, c) != jsonOf(t, want) {
				t.Errorf("config after the edit:\n%s\nwant:\n%s", jsonOf(t, c), jsonOf(t, want))
			}
			diff, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
				A: difflib.SplitLines(string(original)), B: difflib.SplitLines(string(got)),
				FromFile: tc.file + ".yaml", ToFile: tc.file + ".yaml", Context: 1,
			})
			if err != nil {
				t.Fatal(err)
			}
			golden.Assert(t, tc.file+"-"+tc.name, []byte(diff))

			// Windows line endings are kept, new lines included.
			crlf := []byte(strings.ReplaceAll(string(original), "\n", "\r\n"))
			if got2, _, err := ApplyEdits(crlf, tc.edits); err != nil || string(got2) != strings.ReplaceAll(string(got), "\n", "\r\n") {
				t.Errorf("with CRLF line endings: %v\n%q", err, got2)
			}
		})
	}
}

// TestAddThenRemoveRestoresFile: a pool added and removed again leaves
// the file byte for byte as it was.
func TestAddThenRemoveRestoresFile(t *testing.T) {
	t.Parallel()
	for _, file := range []string{"commented", "flow", "odd-indent"} {
		original := readEditsFixture(t, file)
		got, _, err := ApplyEdits(original, []Edit{{Op: "add", Spec: "extra=198.51.100.64/27"}, {Op: "remove", Spec: "extra"}})
		if err != nil || string(got) != string(original) {
			t.Errorf("%s: %v\n%s", file, err, got)
		}
	}
}

// editStruct is the meaning of edits, applied to the decoded config.
func editStruct(t *testing.T, original []byte, edits []Edit) *v1alpha1.ClusterVIPs {
	t.Helper()
	c, err := v1alpha1.Decode(original)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range edits {
		name, list, _ := strings.Cut(e.Spec, "=")
		var addrs []string
		for _, a := range strings.Split(list, ",") {
			addrs = append(addrs, strings.TrimSpace(a))
		}
		i := 0
		for i < len(c.Spec.ServicePools) && c.Spec.ServicePools[i].Name != name {
			i++
		}
		switch e.Op {
		case "add":
			c.Spec.ServicePools = append(c.Spec.ServicePools, v1alpha1.ServicePool{Name: name, Addresses: addrs})
		case "set":
			c.Spec.ServicePools[i].Addresses = addrs
		case "remove":
			c.Spec.ServicePools = slices.Delete(c.Spec.ServicePools, i, i+1)
		case "mode":
			c.Spec.ServicePools[i].Mode = list
		}
	}
	v1alpha1.SetDefaults(c)
	return c
}

func jsonOf(t *testing.T, c *v1alpha1.ClusterVIPs) string {
	t.Helper()
	data, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestEditsRefused: a file the edits cannot be made to safely, or an edit
// that makes the config invalid, is an error naming the problem, and no
// text comes back to be written.
func TestEditsRefused(t *testing.T) {
	t.Parallel()
	cases := []struct {
		file string
		edit Edit
		want string
	}{
		{"two-documents", Edit{Op: "add", Spec: "extra=198.51.100.64/27"},
			"the file holds more than one YAML document; quick edits need the ClusterVIPs alone"},
		{"commented", Edit{Op: "set", Spec: "edge=203.0.113.64/33"},
			`1 invalid field(s):
  spec.servicePools[1].addresses[0]: Invalid value: "203.0.113.64/33": invalid CIDR`},
		{"flow", Edit{Op: "add", Spec: "extra=198.51.100.160/28"},
			`1 invalid field(s):
  spec.servicePools[2].addresses[0]: Invalid value: "198.51.100.160/28": overlaps spec.servicePools[0].addresses[0]`},
		{"odd-indent", Edit{Op: "set", Spec: "edge=198.51.100.0/28"},
			`2 invalid field(s):
  spec.api.vips[0]: Invalid value: "198.51.100.5": inside service pool spec.servicePools[1].addresses[0]
  spec.ingress[0].vips[0]: Invalid value: "198.51.100.6": inside service pool spec.servicePools[1].addresses[0]`},
		{"commented", Edit{Op: "remove", Spec: "rack-b"}, `--remove-pool "rack-b": no pool rack-b`},
		{"commented", Edit{Op: "mode", Spec: "rack-b=bgp"}, `--set-pool-mode "rack-b=bgp": no pool rack-b`},
		{"commented", Edit{Op: "mode", Spec: "rack-a"}, `--set-pool-mode "rack-a": want NAME=vrrp|bgp`},
		{"commented", Edit{Op: "mode", Spec: "rack-a=bgp"},
			`1 invalid field(s):
  spec.bgp: Required value: spec.servicePools[0] has mode bgp: name the nodes' ASN and their peers`},
		{"bgp", Edit{Op: "mode", Spec: "web=ospf"},
			`1 invalid field(s):
  spec.servicePools[0].mode: Unsupported value: "ospf": supported values: "vrrp", "bgp"`},
	}
	for _, tc := range cases {
		got, c, err := ApplyEdits(readEditsFixture(t, tc.file), []Edit{tc.edit})
		if err == nil || err.Error() != tc.want || got != nil || c != nil {
			t.Errorf("%s %+v: %q, %v\nwant error %q", tc.file, tc.edit, got, err, tc.want)
		}
	}
}

func TestWriteFileKeepsMode(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "cluster.yaml")
	if err := os.WriteFile(path, []byte("old\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(path, []byte("new\n")); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	data, _ := os.ReadFile(path)
	if err != nil || st.Mode().Perm() != 0o600 || string(data) != "new\n" {
		t.Errorf("after WriteFile: %q, mode %v, %v", data, st.Mode(), err)
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Errorf("temp files left: %v", entries)
	}
}
