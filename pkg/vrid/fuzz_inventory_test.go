package vrid

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/vipctl/vipctl/test/fixture"
)

// FuzzInventory: any bytes given as vr-ids --inventory. No input may
// panic; an inventory it accepts lists at least one cluster, each with a
// valid name, once, and no VRRP ID 0, and the clash check runs over it.
// The seeds are testdata/inventory.yaml and testdata/bad-input/inventory-*.yaml.
func FuzzInventory(f *testing.F) {
	seeds, _ := filepath.Glob(fixture.Repo("testdata/bad-input/inventory-*.yaml"))
	for _, p := range append(seeds, fixture.Repo("testdata/inventory.yaml")) {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	assignment, err := Assign(RequestFor(fixture.Example(f, "compact-ipv4.yaml")))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "inventory.yaml")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		inv, err := LoadInventory(path)
		if err != nil {
			return
		}
		if len(inv.Clusters) == 0 {
			t.Fatal("accepted an inventory of no cluster")
		}
		seen := map[string]bool{}
		for i, k := range inv.Clusters {
			if err := ValidateClusterName(k.Name); err != nil {
				t.Fatalf("clusters[%d]: accepted name %q: %v", i, k.Name, err)
			}
			if seen[k.Name] {
				t.Fatalf("clusters[%d]: accepted %q twice", i, k.Name)
			}
			seen[k.Name] = true
			for label, id := range k.IDs {
				if id == 0 {
					t.Fatalf("clusters[%d].ids[%s]: accepted 0", i, label)
				}
			}
		}
		_ = FindClashes(assignment, inv.Clusters, nil, "")
	})
}
