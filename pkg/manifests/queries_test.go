package manifests_test

import (
	"fmt"
	"regexp"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/vipctl/vipctl/pkg/allocator"
	"github.com/vipctl/vipctl/pkg/sidecar"
)

// describer records the names of the series of the collectors registered
// with it: a histogram's are its _bucket, _sum and _count, a summary's
// its quantiles, _sum and _count.
type describer struct{ names map[string]bool }

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

var (
	histogramSeries = []string{"_bucket", "_sum", "_count"}
	summarySeries   = []string{"", "_sum", "_count"}
)

func (d *describer) Register(c prometheus.Collector) error {
	suffixes := []string{""}
	switch c.(type) {
	case *prometheus.HistogramVec:
		suffixes = histogramSeries
	case *prometheus.SummaryVec:
		suffixes = summarySeries
	default:
		// A plain Histogram and Summary have the same methods: what
		// they write tells them apart.
		ch := make(chan prometheus.Metric)
		go func() { c.Collect(ch); close(ch) }()
		for m := range ch {
			var pb dto.Metric
			if err := m.Write(&pb); err != nil {
				return err
			}
			switch {
			case pb.Histogram != nil:
				suffixes = histogramSeries
			case pb.Summary != nil:
				suffixes = summarySeries
			}
		}
	}
	ch := make(chan *prometheus.Desc)
	go func() { c.Describe(ch); close(ch) }()
	for desc := range ch {
		if m := fqName.FindStringSubmatch(desc.String()); m != nil {
			for _, s := range suffixes {
				d.names[m[1]+s] = true
			}
		}
	}
	return nil
}

func (d *describer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := d.Register(c); err != nil {
			panic(err)
		}
	}
}

func (d *describer) Unregister(prometheus.Collector) bool { return false }

// exportedMetrics are the series vipctl exports: whatever the sidecar's
// and the allocator's NewMetrics register, as the binary's registries get
// them.
func exportedMetrics() map[string]bool {
	d := &describer{names: map[string]bool{}}
	sidecar.NewMetrics(d)
	allocator.NewMetrics(d)
	return d.names
}

// checkQuery parses expr with Prometheus's own parser and returns what
// is wrong with it: a parse error, or a series it selects that is not in
// known (or selected by no name at all, which no check could follow).
func checkQuery(expr string, known map[string]bool) []error {
	ast, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		return []error{fmt.Errorf("%q does not parse: %w", expr, err)}
	}
	var errs []error
	parser.Inspect(ast, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		switch {
		case vs.Name == "":
			errs = append(errs, fmt.Errorf("%q: selector %s names no metric", expr, vs))
		case !known[vs.Name]:
			errs = append(errs, fmt.Errorf("%q reads %s, which neither the sidecar nor the allocator exports", expr, vs.Name))
		}
		return nil
	})
	return errs
}
