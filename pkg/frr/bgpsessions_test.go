package frr

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The testdata files are FRR 8.4.4's own `show bgp neighbors json` on
// node a0 of the BGP lab (TestBGPSessions' lab, bfd on): with the
// session up, and 5 s after the router stopped.
func TestParseBGPNeighbors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		file string
		want PeerState
	}{
		{"bgp-neighbors-established-bfd.json", PeerState{Peer: "198.51.100.1", ASN: 64512, State: "Established", InState: 4 * time.Second,
			PrefixesSent: 1, Established: 1, BFD: "Up"}},
		{"bgp-neighbors-router-gone-bfd.json", PeerState{Peer: "198.51.100.1", ASN: 64512, State: "Active", InState: 5 * time.Second,
			Established: 1, Dropped: 1, BFD: "Down"}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			t.Parallel()
			b, err := os.ReadFile(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			got, err := ParseNeighbors(b)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]PeerState{tc.want}, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	if _, err := ParseNeighbors([]byte("% Unknown command")); err == nil {
		t.Error("vtysh's text accepted as JSON")
	}
}

// TestBGPSessionsSinceStable: Since follows bgpd's clock when a session
// changes and stays put while it does not, whatever the uptime says, so
// the published value does not change with every read.
func TestBGPSessionsSinceStable(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	up := PeerState{Peer: "198.51.100.1", ASN: 64512, State: "Established", InState: 4 * time.Second, PrefixesSent: 1, Established: 1}
	first := Sessions(nil, []PeerState{up}, t0)
	if want := t0.Add(-4 * time.Second); !first[0].Since.Equal(want) {
		t.Fatalf("since %s, want %s (now - bgpd's uptime)", first[0].Since, want)
	}
	// 7 s later bgpd says 10 s (its clock ticks in whole seconds).
	up.InState = 10 * time.Second
	if again := Sessions(first, []PeerState{up}, t0.Add(7*time.Second)); again.String() != first.String() {
		t.Errorf("unchanged session republished:\n%s\n%s", first, again)
	}
	// It dropped and came back between two reads: a new Since.
	up.InState, up.Dropped, up.Established = 2*time.Second, 1, 2
	flapped := Sessions(first, []PeerState{up}, t0.Add(20*time.Second))
	if want := t0.Add(18 * time.Second); !flapped[0].Since.Equal(want) || flapped[0].Dropped != 1 {
		t.Errorf("after a flap: %+v, want since %s and 1 drop", flapped[0], want)
	}
	down := up
	down.State, down.InState = "Active", time.Second
	if got := Sessions(flapped, []PeerState{down}, t0.Add(30*time.Second)); got[0].Established() || !got[0].Since.Equal(t0.Add(29*time.Second)) {
		t.Errorf("down: %+v", got[0])
	}
}
