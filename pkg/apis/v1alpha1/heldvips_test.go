package v1alpha1

import (
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"
)

// heldPool is n consecutive addresses from first, of one instance, with
// since advancing a second every step addresses (0: all the same).
func heldPool(first string, n int, instance InstanceKey, step int) HeldVIPs {
	t0 := time.Date(2026, 11, 28, 0, 25, 41, 0, time.UTC)
	var out HeldVIPs
	a := netip.MustParseAddr(first)
	for i := range n {
		since := t0
		if step > 0 {
			since = t0.Add(time.Duration(i/step) * time.Second)
		}
		out = append(out, HeldVIP{Address: a.String(), Instance: instance, Since: since})
		a = a.Next()
	}
	return out
}

func TestHeldVIPsRoundTrip(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	for name, held := range map[string]HeldVIPs{
		"api and ingress": {
			{Address: "198.51.100.5", Instance: "api", Since: t0},
			{Address: "198.51.100.6", Instance: "ingress/default", Since: t0.Add(time.Second)},
			{Address: "2001:db8::5", Instance: "api", Since: t0},
		},
		"a stray and a pool's run": append(HeldVIPs{{Address: "198.51.100.200", Since: t0}},
			heldPool("2001:db8:100::1:fffe", 4, "pool/scale/1", 0)...),
		"5000 added over time": heldPool("2001:db8:100::1:1", 5000, "pool/scale/1", 30),
	} {
		t.Run(name, func(t *testing.T) {
			got, err := ParseHeldVIPs(held.String())
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, held) {
				t.Fatalf("read back %v, published %v", got, held)
			}
		})
	}
}

// TestHeldVIPsFitANode: a node that took over 5000 Services' addresses
// published them as one object each, 370 KB: the apiserver refused the
// Node (annotations over 256 KiB), so the node published nothing at all
// (BenchmarkPeersScale at 5000, the pool on one node after a node loss).
func TestHeldVIPsFitANode(t *testing.T) {
	held := heldPool("2001:db8:100::1:1", 5000, "pool/scale/1", 1)
	if v := held.String(); len(v) > MaxHeldVIPsBytes {
		t.Fatalf("5000 consecutive addresses published in %d bytes, more than %d", len(v), MaxHeldVIPsBytes)
	}
	// Every other address, each seen since its own second: past the
	// limit as groups by second, so one group per instance.
	var scattered HeldVIPs
	t0 := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	for i := range 5000 {
		a := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 14: byte(i >> 7), 15: byte(2 * i)})
		scattered = append(scattered, HeldVIP{Address: a.String(), Instance: "pool/big/1", Since: t0.Add(time.Duration(i) * time.Second)})
	}
	v := scattered.String()
	if len(v) > MaxHeldVIPsBytes {
		t.Fatalf("5000 scattered addresses published in %d bytes", len(v))
	}
	got, err := ParseHeldVIPs(v)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 5000 || got[0].Since != t0.Add(4999*time.Second) {
		t.Fatalf("read back %d addresses, the first since %s; want 5000, all since the latest", len(got), got[0].Since)
	}
	// Too many to list even so: counted per instance.
	var huge HeldVIPs
	for i := range 20000 {
		a := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 1, 2, 3, 4, 5, 6, 7, 8, byte(i >> 8), byte(i), 0, 1})
		huge = append(huge, HeldVIP{Address: a.String(), Instance: "pool/big/1", Since: t0})
	}
	huge = append(huge, HeldVIP{Address: "198.51.100.5", Instance: "api", Since: t0})
	v = huge.String()
	if len(v) > MaxHeldVIPsBytes {
		t.Fatalf("20001 addresses published in %d bytes", len(v))
	}
	got, err = ParseHeldVIPs(v)
	if err != nil {
		t.Fatal(err)
	}
	want := HeldVIPs{{Instance: "api", Since: t0, Unlisted: 1}, {Instance: "pool/big/1", Since: t0, Unlisted: 20000}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("read back %v, want %v", got, want)
	}
}

// TestParseHeldVIPsEarlierForm: a node whose sidecar is not upgraded yet
// publishes one object per address; it still reads.
func TestParseHeldVIPsEarlierForm(t *testing.T) {
	got, err := ParseHeldVIPs(`[{"address":"198.51.100.5","instance":"api","since":"2026-11-28T00:00:00Z"},{"address":"2001:db8::5","since":"2026-11-28T00:00:01Z"}]`)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	want := HeldVIPs{{Address: "198.51.100.5", Instance: "api", Since: t0}, {Address: "2001:db8::5", Since: t0.Add(time.Second)}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestParseHeldVIPsRefusesBadRanges(t *testing.T) {
	for _, r := range []string{"198.51.100.9-198.51.100.1", "198.51.100.1-2001:db8::1", "2001:db8::-2001:db8::ffff:ffff", "198.51.100.1-x", "nope"} {
		_, err := ParseHeldVIPs(fmt.Sprintf(`[{"addresses":[%q],"since":"2026-11-28T00:00:00Z"}]`, r))
		if err == nil || !strings.Contains(err.Error(), AnnotationNodeVIPs) {
			t.Errorf("%s: error %v, want one naming %s", r, err, AnnotationNodeVIPs)
		}
	}
}
