// Package dnsrecords knows which DNS records a cluster's VIPs need (api,
// api-int, the wildcard of every IngressController's domain, A and AAAA),
// writes them in the forms the people who create them want (an RFC 1035
// zone snippet, JSON and CSV for a DNS team's ticket, a DNSEndpoint for
// external-dns), and checks a DNS server against them (`vipctl dns
// check`). OpenShift does not install without them: the installer waits
// on api, every node fetches its Ignition from api-int, the console and
// OAuth live under *.apps.
package dnsrecords

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/miekg/dns"
	"sigs.k8s.io/yaml"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
)

// TTL of every record written: five minutes, so that a VIP readdressed
// with `vipctl update` reaches clients within minutes, while caches still
// spare the DNS servers every lookup.
const TTL = 300

// Record types.
const (
	TypeA    = "A"
	TypeAAAA = "AAAA"
)

// Record is one address record the cluster needs.
type Record struct {
	// Name is absolute, with the trailing dot; an IngressController's is
	// the wildcard of its domain (*.apps.<cluster>.<baseDomain>.).
	Name string `json:"name"`
	// Type is A or AAAA.
	Type string `json:"type"`
	// TTL in seconds.
	TTL uint32 `json:"ttl"`
	// Address is the VIP the name resolves to.
	Address netip.Addr `json:"address"`
	// Field is where the config names that address (spec.api.vips[0]).
	Field string `json:"field"`
}

// For lists the records m needs, in the config's order: api to the API
// VIPs, api-int to its own (spec.api.internalVIPs) or else the API's, and
// the wildcard of each IngressController's domain to
// its VIPs, one record per VIP (A for IPv4, AAAA for IPv6). m's config
// must have passed validation (defaults set: the default controller's
// domain).
func For(m *cluster.Model) []Record {
	var out []Record
	add := func(name string, vip netip.Addr, field string) {
		t := TypeA
		if vip.Is6() {
			t = TypeAAAA
		}
		out = append(out, Record{Name: dns.Fqdn(name), Type: t, TTL: TTL, Address: vip, Field: field})
	}
	domain := m.Config.ClusterDomain()
	for i, v := range m.API {
		add("api."+domain, v, fmt.Sprintf("spec.api.vips[%d]", i))
	}
	internal, field := m.API, "spec.api.vips"
	if len(m.APIInternal) > 0 {
		internal, field = m.APIInternal, "spec.api.internalVIPs"
	}
	for i, v := range internal {
		add("api-int."+domain, v, fmt.Sprintf("%s[%d]", field, i))
	}
	for i, in := range m.Ingress {
		for j, v := range in.VIPs {
			add("*."+m.Config.Spec.Ingress[i].Domain, v, fmt.Sprintf("spec.ingress[%d].vips[%d]", i, j))
		}
	}
	return out
}

// Applies tells why c has no records for vipctl to write or check (nil:
// it has): in mode poolsOnly OpenShift's own keepalived holds the API and
// ingress VIPs, named in install-config and not in c, and OpenShift's
// on-premise stack serves their names itself.
func Applies(c *v1alpha1.ClusterVIPs) error {
	if c.PoolsOnly() {
		return fmt.Errorf("spec.mode %s: the API and ingress VIPs are OpenShift's own (install-config's apiVIPs and ingressVIPs), which this file does not name; their DNS records are OpenShift's on-premise DNS's job, not vipctl's", v1alpha1.ModePoolsOnly)
	}
	return nil
}

// rr is r as the DNS library's typed record.
func (r Record) rr() dns.RR {
	hdr := dns.RR_Header{Name: r.Name, Class: dns.ClassINET, Ttl: r.TTL}
	ip := net.IP(r.Address.AsSlice())
	if r.Type == TypeAAAA {
		hdr.Rrtype = dns.TypeAAAA
		return &dns.AAAA{Hdr: hdr, AAAA: ip}
	}
	hdr.Rrtype = dns.TypeA
	return &dns.A{Hdr: hdr, A: ip}
}

// Zone is the records as an RFC 1035 master file snippet, one record a
// line with absolute names, so that it can be pasted into, or $INCLUDEd
// by, the zone of the base domain or of any parent of it.
func Zone(c *v1alpha1.ClusterVIPs, records []Record) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "; The address records of cluster %s's VIPs (vipctl render).\n", c.ClusterDomain())
	b.WriteString("; Names are absolute: paste into, or $INCLUDE from, the zone that holds them.\n")
	for _, r := range records {
		b.WriteString(r.rr().String())
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// JSON is the records as a JSON array, for tools and tickets.
func JSON(records []Record) ([]byte, error) {
	if records == nil {
		records = []Record{}
	}
	data, err := json.MarshalIndent(records, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}

// CSV is the records as comma-separated values with a header line, for
// a spreadsheet or a DNS team's ticket.
func CSV(records []Record) ([]byte, error) {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	rows := [][]string{{"name", "type", "ttl", "address", "field"}}
	for _, r := range records {
		rows = append(rows, []string{r.Name, r.Type, strconv.FormatUint(uint64(r.TTL), 10), r.Address.String(), r.Field})
	}
	if err := w.WriteAll(rows); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// DNSEndpoint is external-dns's custom resource (group externaldns.k8s.io,
// its CRD source): the fields external-dns reads, written here rather
// than importing external-dns.
type DNSEndpoint struct {
	APIVersion string              `json:"apiVersion"`
	Kind       string              `json:"kind"`
	Metadata   DNSEndpointMetadata `json:"metadata"`
	Spec       DNSEndpointSpec     `json:"spec"`
}

// DNSEndpointMetadata names the object; the namespace is where it is
// applied.
type DNSEndpointMetadata struct {
	Name string `json:"name"`
}

// DNSEndpointSpec lists the endpoints.
type DNSEndpointSpec struct {
	Endpoints []Endpoint `json:"endpoints"`
}

// Endpoint is one name and type with all of its targets.
type Endpoint struct {
	DNSName    string   `json:"dnsName"`
	RecordType string   `json:"recordType"`
	Targets    []string `json:"targets"`
	RecordTTL  int64    `json:"recordTTL"`
}

// ExternalDNS is the records as one DNSEndpoint named <cluster>-vips,
// one endpoint per name and type (external-dns wants names without the
// trailing dot).
func ExternalDNS(c *v1alpha1.ClusterVIPs, records []Record) ([]byte, error) {
	obj := DNSEndpoint{
		APIVersion: "externaldns.k8s.io/v1alpha1",
		Kind:       "DNSEndpoint",
		Metadata:   DNSEndpointMetadata{Name: c.Metadata.Name + "-vips"},
		Spec:       DNSEndpointSpec{Endpoints: []Endpoint{}},
	}
	index := map[[2]string]int{}
	for _, r := range records {
		key := [2]string{r.Name, r.Type}
		i, ok := index[key]
		if !ok {
			i = len(obj.Spec.Endpoints)
			index[key] = i
			obj.Spec.Endpoints = append(obj.Spec.Endpoints, Endpoint{DNSName: strings.TrimSuffix(r.Name, "."), RecordType: r.Type, RecordTTL: int64(r.TTL), Targets: []string{}})
		}
		obj.Spec.Endpoints[i].Targets = append(obj.Spec.Endpoints[i].Targets, r.Address.String())
	}
	return yaml.Marshal(obj)
}
