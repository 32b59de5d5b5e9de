package vrid

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// poolKeys are n pool instance keys, without api and ingress: what a
// pools-only cluster file asks IDs for.
func poolKeys(n int) []Key { return keys(n)[2:] }

// collidingCluster finds a cluster name whose first pool key would take
// OpenShift's API or ingress ID of that very cluster if nothing kept it
// clear: the case pools-only mode exists for.
func collidingCluster(t *testing.T) (string, uint8) {
	t.Helper()
	for i := 0; i < 100000; i++ {
		name := fmt.Sprintf("c%d", i)
		api, ingress := OpenShiftIDs(name)
		if c := Candidate(name, poolKeys(1)[0], 0); c == api || c == ingress {
			return name, c
		}
	}
	t.Fatal("no cluster name whose first pool ID is one of its OpenShift IDs")
	return "", 0
}

// TestPoolsOnlyKeepsClearOfOpenShift: in mode poolsOnly OpenShift's own
// keepalived runs the API and ingress instances with OpenShiftIDs; a pool
// whose hash lands on one of those takes the next free ID instead, the
// two are reported as OpenShift's, and no pin may take them.
func TestPoolsOnlyKeepsClearOfOpenShift(t *testing.T) {
	t.Parallel()
	name, hit := collidingCluster(t)
	api, ingress := OpenShiftIDs(name)
	without, err := Assign(Request{Cluster: name, Keys: poolKeys(1)})
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := without.ID(poolKeys(1)[0]); id != hit {
		t.Fatalf("%s: without OpenShift's keepalived the pool gets %d, want the colliding %d (the test proves nothing)", name, id, hit)
	}
	req := Request{Cluster: name, Keys: poolKeys(20), OpenShiftKeepalived: true}
	got, err := Assign(req)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range got.Entries {
		if e.ID == api || e.ID == ingress {
			t.Errorf("%s: %s got %d, one of OpenShift's own IDs %d/%d", name, e.Key, e.ID, api, ingress)
		}
	}
	want := []Entry{{Key: KeyAPI, ID: api, Source: SourceOpenShift}, {Key: KeyIngress, ID: ingress, Source: SourceOpenShift}}
	if fmt.Sprint(got.OpenShift) != fmt.Sprint(want) {
		t.Errorf("OpenShift = %v, want %v", got.OpenShift, want)
	}

	_, err = Assign(Request{Cluster: name, Keys: poolKeys(1), OpenShiftKeepalived: true, Overrides: map[Key]uint8{poolKeys(1)[0]: ingress}})
	if wantErr := fmt.Sprintf("override pool/p0/0: ID %d is OpenShift's ingress ID, which its own keepalived uses on this LAN (mode poolsOnly)", ingress); err == nil || !strings.Contains(err.Error(), wantErr) {
		t.Errorf("pin on OpenShift's ingress ID: err = %v, want %q", err, wantErr)
	}

	// vr-ids: OpenShift's two lines first, as baremetal-runtimecfg prints
	// them, then the pools, then what was kept clear of.
	report, err := Check{Request: Request{Cluster: "ostest", Keys: poolKeys(1), OpenShiftKeepalived: true}}.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	text := report.Text()
	lines := strings.Split(text, "\n")
	if len(lines) < 4 || lines[0] != "APIVirtualRouterID: 14" || lines[1] != "IngressVirtualRouterID: 93" || !strings.HasPrefix(lines[2], "VirtualRouterID pool/p0/0: ") ||
		lines[3] != "# mode poolsOnly: OpenShift's own keepalived uses 14 (api) and 93 (ingress); vipctl's IDs keep clear of them" {
		t.Errorf("vr-ids text:\n%s", text)
	}

	// A clash of a pool with another cluster is fixed by a proposal that
	// keeps clear of OpenShift's IDs too.
	pool := got.Entries[0]
	others := []KnownCluster{{Name: "other", IDs: map[string]uint8{"pool/x/0": pool.ID}}}
	clashes := FindClashes(got, others, nil, "")
	if len(clashes) != 1 {
		t.Fatalf("clashes %v, want the pool's", clashes)
	}
	var everyOther []uint8
	for id := 1; id <= 255; id++ {
		if uint8(id) != api && uint8(id) != ingress {
			everyOther = append(everyOther, uint8(id))
		}
	}
	// Everything but OpenShift's IDs taken: no proposal may fall back on them.
	if p, err := ProposeOverrides(Request{Cluster: name, Keys: poolKeys(1), OpenShiftKeepalived: true}, clashes[:1], everyOther); err == nil {
		t.Errorf("proposal %v uses OpenShift's own IDs %d/%d", p, api, ingress)
	}
}
