package vrid

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// referenceFletcher is an independent, deliberately plain transcription of
// OpenShift's loop (int arithmetic, explicit wrap), so the known answers
// below do not come from the function under test.
func referenceFletcher(s string) int {
	a, b := 0, 0
	for _, c := range []byte(s) {
		a = ((a + int(c)) % 256) % 15
		b = ((b + a) % 256) % 15
	}
	return b*16 + a
}

func TestOpenShiftKnownAnswers(t *testing.T) {
	t.Parallel()
	// Published in the OpenShift installer's bare-metal docs, and ostest's
	// API ID from its dev-scripts.
	cases := []struct {
		name         string
		api, ingress uint8
	}{
		{"cnf10", 147, 2},
		{"cnf11", 228, 147},
		{"ostest", 14, 93},
	}
	for _, tc := range cases {
		api, ingress := OpenShiftIDs(tc.name)
		if api != tc.api || ingress != tc.ingress {
			t.Errorf("OpenShiftIDs(%q) = %d/%d, want %d/%d", tc.name, api, ingress, tc.api, tc.ingress)
		}
	}
}

func TestOpenShiftMatchesReference(t *testing.T) {
	t.Parallel()
	names := []string{"a", "lab", "prod-east-1", "edge-sbegz", "x0123456789abcdef", "ocp", "mycluster", "z"}
	for _, n := range names {
		for _, suffix := range []string{"-api", "-ingress"} {
			if got, want := int(Fletcher8(n+suffix)), referenceFletcher(n+suffix); got != want {
				t.Errorf("Fletcher8(%q) = %d, reference %d", n+suffix, got, want)
			}
		}
	}
	// Non-ASCII bytes exercise the uint8 wrap-around OpenShift has.
	if got, want := int(Fletcher8("\xff\xfe\xfd")), referenceFletcher("\xff\xfe\xfd"); got != want {
		t.Errorf("Fletcher8 with high bytes = %d, reference %d", got, want)
	}
}

// TestAPIAndIngressNeverCollide: whatever the name, the checksum state
// after it is one of 15x15 pairs, and for none of them do "-api" and
// "-ingress" end equal. So OpenShift's bump (kept in OpenShiftIDs for
// fidelity) never fires, and the two IDs always differ. Checked for every
// state, not sampled.
func TestAPIAndIngressNeverCollide(t *testing.T) {
	t.Parallel()
	resume := func(a, b int, s string) int {
		for _, c := range []byte(s) {
			a = ((a + int(c)) % 256) % 15
			b = ((b + a) % 256) % 15
		}
		return b*16 + a
	}
	for a := 0; a < 15; a++ {
		for b := 0; b < 15; b++ {
			if resume(a, b, "-api") == resume(a, b, "-ingress") {
				t.Errorf("state (%d,%d): api and ingress checksums collide", a, b)
			}
		}
	}
}

func keys(n int) []Key {
	out := []Key{KeyAPI, KeyIngress}
	for i := 0; i < n; i++ {
		out = append(out, Key(fmt.Sprintf("pool/p%d/0", i)))
	}
	return out
}

func TestAssignProperties(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewSource(1))
	for trial := 0; trial < 200; trial++ {
		cluster := fmt.Sprintf("c%d", r.Intn(1000))
		n := r.Intn(60)
		var avoid []uint8
		for i := 0; i < r.Intn(20); i++ {
			id := uint8(1 + r.Intn(255))
			a, in := OpenShiftIDs(cluster)
			if id != a && id != in {
				avoid = append(avoid, id)
			}
		}
		req := Request{Cluster: cluster, Keys: keys(n), Avoid: avoid}
		got, err := Assign(req)
		if err != nil {
			t.Fatalf("%+v: %v", req, err)
		}
		again, _ := Assign(req)
		if fmt.Sprint(got) != fmt.Sprint(again) {
			t.Fatalf("not deterministic")
		}
		used := map[uint8]Key{}
		for _, e := range got.Entries {
			if prev, dup := used[e.ID]; dup {
				t.Fatalf("%s and %s share ID %d", prev, e.Key, e.ID)
			}
			used[e.ID] = e.Key
			for _, a := range avoid {
				if e.ID == a {
					t.Fatalf("%s got avoided ID %d", e.Key, a)
				}
			}
		}
		// Appending keys never changes an earlier key's ID.
		longer := req
		longer.Keys = keys(n + 1 + r.Intn(10))
		more, err := Assign(longer)
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range got.Entries {
			if more.Entries[i] != e {
				t.Fatalf("appending keys changed %s: %d -> %d", e.Key, e.ID, more.Entries[i].ID)
			}
		}
	}
}

func TestAssignOverridesAndErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		req  Request
		want string
	}{
		{"pin steals openshift id", Request{Cluster: "ostest", Keys: keys(1), Overrides: map[Key]uint8{"pool/p0/0": 14}}, "api: OpenShift's ID 14 is pinned by the override for pool/p0/0; pin api too"},
		{"openshift id avoided", Request{Cluster: "ostest", Keys: keys(0), Avoid: []uint8{93}}, "ingress: OpenShift's ID 93 is in the avoid list; pin another with an override"},
		{"duplicate pins", Request{Cluster: "ostest", Keys: keys(2), Overrides: map[Key]uint8{"pool/p0/0": 7, "pool/p1/0": 7}}, "overrides pool/p0/0 and pool/p1/0 both pin ID 7"},
		{"pin avoided", Request{Cluster: "ostest", Keys: keys(1), Overrides: map[Key]uint8{"pool/p0/0": 7}, Avoid: []uint8{7}}, "override pool/p0/0: ID 7 is also in the avoid list"},
		{"unknown key", Request{Cluster: "ostest", Keys: keys(0), Overrides: map[Key]uint8{"pool/zz/0": 7}}, "override for unknown key pool/zz/0"},
		{"bad cluster", Request{Cluster: "Bad_Name", Keys: keys(0)}, `invalid cluster name "Bad_Name"`},
	}
	for _, tc := range cases {
		_, err := Assign(tc.req)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
	}
	pinned, err := Assign(Request{Cluster: "ostest", Keys: keys(1), Overrides: map[Key]uint8{"api": 200, "pool/p0/0": 14}})
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := pinned.ID("api"); id != 200 {
		t.Errorf("api = %d, want pinned 200", id)
	}
	if id, _ := pinned.ID("pool/p0/0"); id != 14 {
		t.Errorf("pool = %d, want pinned 14", id)
	}
}

func TestAssignExhaustion(t *testing.T) {
	t.Parallel()
	var avoid []uint8
	api, ingress := OpenShiftIDs("ostest")
	for id := 1; id <= 255; id++ {
		if uint8(id) != api && uint8(id) != ingress {
			avoid = append(avoid, uint8(id))
		}
	}
	// Leave exactly one ID free: the third key must find it, the fourth fail.
	free := avoid[100]
	avoid = append(avoid[:100], avoid[101:]...)
	got, err := Assign(Request{Cluster: "ostest", Keys: keys(1), Avoid: avoid})
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := got.ID("pool/p0/0"); id != free {
		t.Errorf("last free ID %d not found, got %d", free, id)
	}
	if _, err := Assign(Request{Cluster: "ostest", Keys: keys(2), Avoid: avoid}); err == nil || !strings.Contains(err.Error(), "all 255 VRRP IDs are taken or avoided") {
		t.Errorf("err = %v", err)
	}
}

func TestFindClashesAndProposal(t *testing.T) {
	t.Parallel()
	req := Request{Cluster: "cnf11", Keys: keys(0)}
	a, err := Assign(req)
	if err != nil {
		t.Fatal(err)
	}
	others := []KnownCluster{{Name: "cnf10"}, {Name: "lab", IDs: map[string]uint8{"pool/x/0": 228}}}
	live := []Observation{{ID: 147, Version: 3, Family: "ipv4"}}
	clashes := FindClashes(a, others, live, "br-ex")
	var got []string
	for _, c := range clashes {
		got = append(got, c.String())
	}
	want := []string{
		"clash: IngressVirtualRouterID 147 also seen live on br-ex from invalid IP (VRRPv3)",
		"clash: IngressVirtualRouterID 147 also used by cluster cnf10 (api)",
		"clash: APIVirtualRouterID 228 also used by cluster lab (pool/x/0)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("clashes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	proposal, err := ProposeOverrides(req, clashes, []uint8{147, 2, 228, 239})
	if err != nil {
		t.Fatal(err)
	}
	if len(proposal) != 2 {
		t.Fatalf("proposal %v, want new IDs for api and ingress", proposal)
	}
	fixed := req
	fixed.Overrides = proposal
	b, err := Assign(fixed)
	if err != nil {
		t.Fatalf("proposal does not assign: %v", err)
	}
	if left := FindClashes(b, others, live, "br-ex"); len(left) != 0 {
		t.Errorf("proposal %v still clashes: %v", proposal, left)
	}
	for _, e := range b.Entries {
		if e.ID == 239 || e.ID == 2 {
			t.Errorf("proposal reuses a taken ID: %v", b.Entries)
		}
	}
}

func TestLoadInventory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	inv, err := LoadInventory(write("ok.yaml", "clusters:\n- name: a\n- name: b\n  ids: {api: 9}\n"))
	if err != nil || len(inv.Clusters) != 2 || inv.Clusters[1].IDs["api"] != 9 {
		t.Fatalf("inv = %+v, err %v", inv, err)
	}
	for name, body := range map[string]string{
		"typo.yaml":    "clusters:\n- clustername: a\n",
		"badname.yaml": "clusters:\n- name: A_B\n",
		"zero.yaml":    "clusters:\n- name: a\n  ids: {api: 0}\n",
		"range.yaml":   "clusters:\n- name: a\n  ids: {api: 256}\n",
	} {
		if _, err := LoadInventory(write(name, body)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestLoadInventoryRefuses: an inventory that checks nothing, or names a
// cluster twice, is refused with its file and field, every problem at
// once: an empty file used to report "no clash".
func TestLoadInventoryRefuses(t *testing.T) {
	t.Parallel()
	const none = "clusters: Required value: no cluster; an inventory lists the other clusters on the LAN (clusters: [{name: cnf10}, {name: lab, ids: {api: 10}}]), and one without any would check nothing"
	// Run as TestLoadInventory's errors are: the file, then the problem.
	cases := []struct {
		name, body, want string
	}{
		{"an empty file", "", none},
		{"comments only", "# the lab's clusters, to be filled in\n", none},
		{"no cluster listed", "clusters: []\n", none},
		{"clusters: null", "clusters:\n", none},
		{"a cluster file", "apiVersion: vipctl.io/v1alpha1\nkind: ClusterVIPs\n", `not an inventory: unknown field "apiVersion", unknown field "kind"; want, for example, clusters: [{name: cnf10}, {name: lab, ids: {api: 10}}]`},
		{"a misspelt field", "clusters:\n- clustername: a\n", `not an inventory: unknown field "clusters[0].clustername"; want, for example, clusters: [{name: cnf10}, {name: lab, ids: {api: 10}}]`},
		{"a cluster twice", "clusters:\n- name: cnf10\n- name: lab\n- name: cnf10\n  ids: {api: 9}\n", `clusters[2].name: Duplicate value: "cnf10" (also clusters[0])`},
		{"every problem at once", "clusters:\n- name: A_B\n- name: lab\n  ids: {ingress: 0, api: 0}\n- name: lab\n",
			"clusters[0].name: invalid cluster name \"A_B\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')\n" +
				"INV: clusters[1].ids[api]: 0 is not a VRRP ID (1-255)\n" +
				"INV: clusters[1].ids[ingress]: 0 is not a VRRP ID (1-255)\n" +
				"INV: clusters[2].name: Duplicate value: \"lab\" (also clusters[1])"},
	}
	for _, tc := range cases {
		path := filepath.Join(t.TempDir(), "inventory.yaml")
		if err := os.WriteFile(path, []byte(tc.body), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := LoadInventory(path)
		want := path + ": " + strings.ReplaceAll(tc.want, "INV", path)
		if err == nil || err.Error() != want {
			t.Errorf("%s:\n%v\nwant:\n%s", tc.name, err, want)
		}
	}
}

// TestCheckRefusesListen: --listen names an interface, checked before a
// socket is opened.
func TestCheckRefusesListen(t *testing.T) {
	t.Parallel()
	c := Check{Request: Request{Cluster: "ostest", Keys: []Key{KeyAPI}}, Listen: "br-ex;reboot", ListenFor: 5e9}
	want := `--listen "br-ex;reboot": must be a network interface name: 1-15 of A-Z a-z 0-9 _ . -`
	if _, err := c.Run(t.Context()); err == nil || err.Error() != want {
		t.Errorf("%v, want %s", err, want)
	}
}
