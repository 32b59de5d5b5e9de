package dnsrecords

import (
	"bytes"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/test/fixture"
	"github.com/vipctl/vipctl/test/golden"
)

// TestRecordsGolden pins, for every example, the records in each form
// render writes them.
func TestRecordsGolden(t *testing.T) {
	t.Parallel()
	for _, name := range fixture.Examples(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := fixture.Example(t, name)
			if err := Applies(c); err != nil {
				// render writes none: the golden holds why.
				golden.Assert(t, strings.TrimSuffix(name, ".yaml"), []byte("--- no records: "+err.Error()+"\n"))
				return
			}
			records := For(cluster.Compile(c))
			js, err := JSON(records)
			if err != nil {
				t.Fatal(err)
			}
			cs, err := CSV(records)
			if err != nil {
				t.Fatal(err)
			}
			ep, err := ExternalDNS(c, records)
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			for _, part := range []struct {
				name string
				data []byte
			}{{"records.zone", Zone(c, records)}, {"records.json", js}, {"records.csv", cs}, {"dnsendpoint.yaml", ep}} {
				b.WriteString("--- " + part.name + "\n")
				b.Write(part.data)
			}
			golden.Assert(t, strings.TrimSuffix(name, ".yaml"), b.Bytes())
		})
	}
}

// TestZoneParsesBackToTheRecords: the DNS library's own master-file
// parser reads the snippet back as exactly the records, wildcards and
// IPv6 included (the lab's bind9 serves it too: test/e2e TestDNSCheck).
func TestZoneParsesBackToTheRecords(t *testing.T) {
	t.Parallel()
	for _, name := range fixture.Examples(t) {
		c := fixture.Example(t, name)
		records := For(cluster.Compile(c))
		zp := dns.NewZoneParser(bytes.NewReader(Zone(c, records)), "", name)
		var got []Record
		for rr, ok := zp.Next(); ok; rr, ok = zp.Next() {
			r := Record{Name: rr.Header().Name, TTL: rr.Header().Ttl}
			switch rr := rr.(type) {
			case *dns.A:
				r.Type, r.Address = TypeA, netip.MustParseAddr(rr.A.String())
			case *dns.AAAA:
				r.Type, r.Address = TypeAAAA, netip.MustParseAddr(rr.AAAA.String())
			default:
				t.Fatalf("%s: unexpected record %s", name, rr)
			}
			got = append(got, r)
		}
		if err := zp.Err(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(got) != len(records) {
			t.Fatalf("%s: %d records parsed, want %d", name, len(got), len(records))
		}
		for i, r := range records {
			r.Field = ""
			if got[i] != r {
				t.Errorf("%s: record %d parsed as %+v, want %+v", name, i, got[i], r)
			}
		}
	}
}

// TestForNamesEveryVIP: api and api-int for each API VIP, the wildcard of
// each controller's own domain for its VIPs, and the family picks the
// type.
func TestForNamesEveryVIP(t *testing.T) {
	t.Parallel()
	c := fixture.Example(t, "dual-stack.yaml")
	want := []Record{
		{"api.dualstack.example.test.", TypeA, TTL, netip.MustParseAddr("198.51.100.5"), "spec.api.vips[0]"},
		{"api.dualstack.example.test.", TypeAAAA, TTL, netip.MustParseAddr("2001:db8:100::5"), "spec.api.vips[1]"},
		{"api-int.dualstack.example.test.", TypeA, TTL, netip.MustParseAddr("198.51.100.5"), "spec.api.vips[0]"},
		{"api-int.dualstack.example.test.", TypeAAAA, TTL, netip.MustParseAddr("2001:db8:100::5"), "spec.api.vips[1]"},
		{"*.apps.dualstack.example.test.", TypeA, TTL, netip.MustParseAddr("198.51.100.6"), "spec.ingress[0].vips[0]"},
		{"*.apps.dualstack.example.test.", TypeAAAA, TTL, netip.MustParseAddr("2001:db8:100::6"), "spec.ingress[0].vips[1]"},
	}
	got := For(cluster.Compile(c))
	if len(got) != len(want) {
		t.Fatalf("records %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("record %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	shards := For(cluster.Compile(fixture.Example(t, "ingress-shards.yaml")))
	if r := shards[len(shards)-1]; r.Name != "*.partners.sharded.example.test." || r.Address != netip.MustParseAddr("198.51.100.8") {
		t.Errorf("last shard's record %+v, want *.partners.sharded.example.test. -> 198.51.100.8", r)
	}
}

func TestServerAddress(t *testing.T) {
	t.Parallel()
	resolv := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(resolv, []byte("search example.test\nnameserver 2001:db8::53\nnameserver 198.51.100.53\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(t.TempDir(), "empty.conf")
	if err := os.WriteFile(empty, []byte("search example.test\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		o       CheckOptions
		want    string
		wantErr string
	}{
		{o: CheckOptions{Server: "198.51.100.53"}, want: "198.51.100.53:53"},
		{o: CheckOptions{Server: "198.51.100.53:5353"}, want: "198.51.100.53:5353"},
		{o: CheckOptions{Server: "2001:db8::53"}, want: "[2001:db8::53]:53"},
		{o: CheckOptions{Server: "[2001:db8::53]:5353"}, want: "[2001:db8::53]:5353"},
		{o: CheckOptions{ResolvConf: resolv}, want: "[2001:db8::53]:53"},
		{o: CheckOptions{Server: "ns.example.test"}, wantErr: `--server "ns.example.test": not an IP address`},
		{o: CheckOptions{ResolvConf: empty}, wantErr: "no --server, and " + empty + " names no nameserver"},
	} {
		got, err := serverAddress(tc.o)
		switch {
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%+v: error %v, want one containing %q", tc.o, err, tc.wantErr)
		case tc.wantErr == "" && (err != nil || got != tc.want):
			t.Errorf("%+v = %q, %v; want %q", tc.o, got, err, tc.want)
		}
	}
}

// TestProblems: each status reads as what to fix.
func TestProblems(t *testing.T) {
	t.Parallel()
	r := &Report{Results: []Result{
		{Name: "api.c.example.test.", Type: TypeA, Status: StatusOK, Want: []string{"198.51.100.5"}, Got: []string{"198.51.100.5"}},
		{Name: "api-int.c.example.test.", Type: TypeA, Status: StatusMissing, Want: []string{"198.51.100.5"}},
		{Name: "*.apps.c.example.test.", Type: TypeA, Status: StatusWrong, Want: []string{"198.51.100.6"}, Got: []string{"198.51.100.66"}},
		{Name: "api.c.example.test.", Type: TypeAAAA, Status: StatusUnexpected, Got: []string{"2001:db8::5"}},
		{Name: "api-int.c.example.test.", Type: TypeAAAA, Status: StatusFailed, Detail: "the server answered SERVFAIL"},
	}}
	want := []string{
		"api-int.c.example.test. A: missing, want 198.51.100.5",
		"*.apps.c.example.test. A: wrong, got 198.51.100.66, want 198.51.100.6",
		"api.c.example.test. AAAA: unexpected 2001:db8::5, where the config has no VIP of that family",
		"api-int.c.example.test. AAAA: failed, the server answered SERVFAIL",
	}
	got := r.Problems()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
