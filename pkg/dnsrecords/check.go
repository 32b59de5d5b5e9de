package dnsrecords

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/miekg/dns"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
)

// WildcardProbe is the label asked for under a wildcard: any name in an
// IngressController's domain must resolve to its VIPs, and a query for
// "*.apps..." itself would only match a record literally named so.
const WildcardProbe = "vipctl-dns-check"

// DefaultResolvConf is where the server comes from when none is named.
const DefaultResolvConf = "/etc/resolv.conf"

// Statuses of a Result.
const (
	// StatusOK: the server answers exactly the VIPs.
	StatusOK = "ok"
	// StatusMissing: no record of the type, where the config has VIPs.
	StatusMissing = "missing"
	// StatusWrong: records, but not exactly the VIPs.
	StatusWrong = "wrong"
	// StatusUnexpected: records of a family the config has no VIP of;
	// clients that prefer it (IPv6 first, usually) go elsewhere.
	StatusUnexpected = "unexpected"
	// StatusFailed: the server answered with an error (SERVFAIL, REFUSED).
	StatusFailed = "failed"
)

// Result is what the server answered for one name and type.
type Result struct {
	// Name is the record's name (a wildcard for an IngressController).
	Name string `json:"name"`
	// Queried is the name asked for, under the wildcard for one.
	Queried string `json:"queried"`
	Type    string `json:"type"`
	Status  string `json:"status"`
	// Want are the VIPs, Got the addresses answered, both sorted.
	Want []string `json:"want,omitempty"`
	Got  []string `json:"got,omitempty"`
	// Detail says more where the status alone does not: the error code,
	// an alias that was not followed.
	Detail string `json:"detail,omitempty"`
}

// Report is a check's findings.
type Report struct {
	// Server is the DNS server asked (address:port).
	Server string `json:"server"`
	// Results has one entry per name and type with a VIP or an answer.
	Results []Result `json:"results"`
}

// Problems are the results that are not ok, one line each.
func (r *Report) Problems() []string {
	var out []string
	for _, res := range r.Results {
		if res.Status == StatusOK {
			continue
		}
		line := fmt.Sprintf("%s %s: %s", res.Name, res.Type, res.Status)
		switch res.Status {
		case StatusMissing:
			line += ", want " + strings.Join(res.Want, ", ")
		case StatusWrong:
			line += ", got " + strings.Join(res.Got, ", ") + ", want " + strings.Join(res.Want, ", ")
		case StatusUnexpected:
			line += " " + strings.Join(res.Got, ", ") + ", where the config has no VIP of that family"
		}
		if res.Detail != "" {
			line += ", " + res.Detail
		}
		out = append(out, line)
	}
	return out
}

// Text is the report for people: a table, then one line per problem.
func (r *Report) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "asked %s\n", r.Server)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "STATUS\tNAME\tTYPE\tANSWER\tWANT")
	for _, res := range r.Results {
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", res.Status, res.Name, res.Type, dash(res.Got), dash(res.Want))
	}
	_ = tw.Flush()
	return b.String()
}

func dash(s []string) string {
	if len(s) == 0 {
		return "-"
	}
	return strings.Join(s, ",")
}

// CheckOptions are the inputs of Check.
type CheckOptions struct {
	// Server is the DNS server, an address with or without a port (53).
	// Empty: the first nameserver of ResolvConf.
	Server string
	// ResolvConf is read when Server is empty. Default /etc/resolv.conf.
	ResolvConf string
	// Timeout bounds each query (two tries); it must be positive
	// (DefaultTimeout is the command's default).
	Timeout time.Duration
}

// Check asks the server for every name of For(c's model), A and AAAA both, and
// reports what is missing or wrong. An error means the check could not be
// made (no server, no answer at all); a server's error code for a name is
// a finding of that name.
func Check(ctx context.Context, c *v1alpha1.ClusterVIPs, o CheckOptions) (*Report, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if err := Applies(c); err != nil {
		return nil, err
	}
	server, err := serverAddress(o)
	if err != nil {
		return nil, err
	}
	client := &dns.Client{Timeout: o.Timeout}
	rep := &Report{Server: server, Results: []Result{}}
	records := For(cluster.Compile(c))
	for _, name := range names(records) {
		for _, t := range []string{TypeA, TypeAAAA} {
			res, err := ask(ctx, client, server, name, t)
			if err != nil {
				return nil, err
			}
			for _, r := range records {
				if r.Name == name && r.Type == t {
					res.Want = append(res.Want, r.Address.String())
				}
			}
			slices.Sort(res.Want)
			res.Status = status(res)
			if len(res.Want) > 0 || len(res.Got) > 0 || res.Status == StatusFailed {
				rep.Results = append(rep.Results, res)
			}
		}
	}
	return rep, nil
}

// names are the record names of records, each once, in order.
func names(records []Record) []string {
	var out []string
	for _, r := range records {
		if !slices.Contains(out, r.Name) {
			out = append(out, r.Name)
		}
	}
	return out
}

// status judges one answer against the VIPs.
func status(res Result) string {
	switch {
	case res.Status == StatusFailed:
		return StatusFailed
	case len(res.Want) == 0 && len(res.Got) > 0:
		return StatusUnexpected
	case len(res.Got) == 0 && len(res.Want) > 0:
		return StatusMissing
	case !slices.Equal(res.Got, res.Want):
		return StatusWrong
	}
	return StatusOK
}

// ask queries the server for one name and type, asking for recursion as a
// client's stub resolver does, and collects the addresses of the answer
// (after any alias the server followed). A truncated answer is asked
// again over TCP; a query without any answer is tried once more.
func ask(ctx context.Context, client *dns.Client, server, name, t string) (Result, error) {
	queried := name
	if rest, ok := strings.CutPrefix(name, "*."); ok {
		queried = WildcardProbe + "." + rest
	}
	res := Result{Name: name, Queried: queried, Type: t}
	qtype := dns.TypeA
	if t == TypeAAAA {
		qtype = dns.TypeAAAA
	}
	m := new(dns.Msg)
	m.SetQuestion(queried, qtype)
	m.RecursionDesired = true
	var in *dns.Msg
	var err error
	for try := 0; try < 2; try++ {
		in, _, err = client.ExchangeContext(ctx, m, server)
		if err == nil && in.Truncated {
			tcp := *client
			tcp.Net = "tcp"
			in, _, err = tcp.ExchangeContext(ctx, m, server)
		}
		if err == nil || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return res, fmt.Errorf("DNS server %s did not answer for %s %s: %w", server, queried, t, err)
	}
	switch in.Rcode {
	case dns.RcodeSuccess, dns.RcodeNameError:
	default:
		res.Status = StatusFailed
		res.Detail = "the server answered " + dns.RcodeToString[in.Rcode]
		return res, nil
	}
	var alias string
	for _, rr := range in.Answer {
		switch rr := rr.(type) {
		case *dns.A:
			if qtype == dns.TypeA {
				res.Got = append(res.Got, rr.A.String())
			}
		case *dns.AAAA:
			if qtype == dns.TypeAAAA {
				res.Got = append(res.Got, rr.AAAA.String())
			}
		case *dns.CNAME:
			alias = rr.Target
		}
	}
	slices.Sort(res.Got)
	res.Got = slices.Compact(res.Got)
	if alias != "" && len(res.Got) == 0 {
		res.Detail = "an alias to " + alias + ", which this server did not resolve"
	}
	return res, nil
}

// serverAddress is the server to ask, as host:port.
func serverAddress(o CheckOptions) (string, error) {
	if o.Server != "" {
		ap, err := parseServer(o.Server)
		return ap.String(), err
	}
	path := o.ResolvConf
	if path == "" {
		path = DefaultResolvConf
	}
	conf, err := dns.ClientConfigFromFile(path)
	if err != nil {
		return "", fmt.Errorf("no --server, and %w", err)
	}
	if len(conf.Servers) == 0 {
		return "", errors.New("no --server, and " + path + " names no nameserver")
	}
	return net.JoinHostPort(conf.Servers[0], conf.Port), nil
}
