package hostfirewall

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzCheck feeds arbitrary listings to Check: whatever nft prints (a
// release's new expression, a ruleset of another tool), the check of
// `vipctl bootstrap` must return a verdict or an error, never panic or
// loop. The seeds are the captured rulesets.
func FuzzCheck(f *testing.F) {
	seeds, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range seeds {
		data, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	packets := append(bootstrapPackets("198.51.100.11"), Packet{What: "VRRP to the group", Src: bootstrapPackets("198.51.100.11")[0].Src, Dst: MulticastVRRP4, Proto: ProtoVRRP, Iface: "ens3"})
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := Check(data, packets, "vipctl")
		if err != nil {
			return
		}
		if len(r.Findings) != len(packets) {
			t.Fatalf("%d findings for %d packets", len(r.Findings), len(packets))
		}
		_, _, _ = r.Problems(), r.Doubts(), r.Fix()
	})
}
