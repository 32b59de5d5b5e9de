package update

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// clusterFile is a cluster file's text with its node tree, which says
// where in the text each key and value starts. yaml.v3 gives no end
// positions: a node in block context ends at its last content line before
// the node that follows it in the document; one in flow context at its
// closing bracket.
type clusterFile struct {
	data  []byte
	lines []int  // byte offset of each line's start
	nl    string // the file's line ending
	// order holds every node in document order; after[n] is the index in
	// order of the first node past n's subtree.
	order []*yaml.Node
	after map[*yaml.Node]int

	spec     *yaml.Node // the spec mapping
	poolsKey *yaml.Node // nil when the file has no spec.servicePools
	pools    *yaml.Node // its value
}

func parseFile(data []byte) (*clusterFile, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("the file is empty")
		}
		return nil, fmt.Errorf("not valid YAML: %w", err)
	}
	// The decoder behind v1alpha1.Parse reads only the first document:
	// editing it and writing the file back would silently keep or drop the
	// rest, so refuse.
	var next yaml.Node
	if err := dec.Decode(&next); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, fmt.Errorf("not valid YAML: %w", err)
		}
		return nil, errors.New("the file holds more than one YAML document; quick edits need the ClusterVIPs alone")
	}
	f := &clusterFile{data: data, nl: "\n", after: map[*yaml.Node]int{}}
	if bytes.Contains(data, []byte("\r\n")) {
		f.nl = "\r\n"
	}
	f.lines = append(f.lines, 0)
	for i, b := range data {
		if b == '\n' && i+1 < len(data) {
			f.lines = append(f.lines, i+1)
		}
	}
	f.walk(&doc)
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, errors.New("the file is not a YAML mapping")
	}
	if _, f.spec = mapValue(doc.Content[0], "spec"); f.spec == nil || f.spec.Kind != yaml.MappingNode {
		return nil, errors.New("spec: not a mapping")
	}
	f.poolsKey, f.pools = mapValue(f.spec, "servicePools")
	if f.pools != nil && f.pools.Kind != yaml.SequenceNode && !isNull(f.pools) {
		return nil, errors.New("spec.servicePools: not a list")
	}
	return f, nil
}

func (f *clusterFile) walk(n *yaml.Node) {
	f.order = append(f.order, n)
	for _, c := range n.Content {
		f.walk(c)
	}
	f.after[n] = len(f.order)
}

func mapValue(m *yaml.Node, key string) (k, v *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i], m.Content[i+1]
		}
	}
	return nil, nil
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.Tag == "!!null" }

func isFlow(n *yaml.Node) bool { return n.Style&yaml.FlowStyle != 0 }

// pool returns the mapping of the pool called name, or nil.
func (f *clusterFile) pool(name string) *yaml.Node {
	if f.pools == nil {
		return nil
	}
	for _, p := range f.pools.Content {
		if _, n := mapValue(p, "name"); n != nil && n.Value == name {
			return p
		}
	}
	return nil
}

// setAddresses replaces the pool's addresses list and nothing else.
func (f *clusterFile) setAddresses(pool *yaml.Node, addrs []string) ([]byte, error) {
	_, list := mapValue(pool, "addresses")
	switch {
	case list == nil || list.Kind != yaml.SequenceNode || len(list.Content) == 0:
		return nil, fmt.Errorf("pool %s: addresses is not a list to replace", poolName(pool))
	case isFlow(list):
		start := f.offset(list)
		end := f.flowEnd(start)
		padded := end-start > 2 && f.data[start+1] == ' '
		return f.splice(edit{start, end, flowList(addrs, quotesOf(pool).addr, padded)}), nil
	default:
		// Items keep the dash, gap and quotes of the first one.
		dash, item := list.Column-1, list.Content[0].Column-1
		var b strings.Builder
		for _, a := range addrs {
			b.WriteString(spaces(dash) + "-" + spaces(item-dash-1) + scalar(a, quotesOf(pool).addr, false) + f.nl)
		}
		return f.splice(edit{f.lines[list.Line-1], f.lineEnd(f.lastLine(list)), b.String()}), nil
	}
}

// setMode replaces the value of the pool's mode key, in its quoting;
// without one it adds the key right after the pool's name, on a line of
// its own in block style, as ", mode: X" in flow style.
func (f *clusterFile) setMode(pool *yaml.Node, mode string) []byte {
	if _, v := mapValue(pool, "mode"); v != nil && v.Kind == yaml.ScalarNode && !isNull(v) {
		start := f.offset(v)
		return f.splice(edit{start, f.scalarEnd(v), scalar(mode, v.Style&quoteStyles, isFlow(pool))})
	}
	k, name := mapValue(pool, "name")
	if isFlow(pool) {
		at := f.scalarEnd(name)
		return f.splice(edit{at, at, ", mode: " + scalar(mode, 0, true)})
	}
	at := f.lineEnd(name.Line - 1)
	return f.splice(edit{at, at, f.lineBreakBefore(at) + spaces(k.Column-1) + "mode: " + scalar(mode, 0, false) + f.nl})
}

// scalarEnd is the offset just past scalar n, which sits on one line.
func (f *clusterFile) scalarEnd(n *yaml.Node) int {
	start := f.offset(n)
	switch n.Style & quoteStyles {
	case yaml.DoubleQuotedStyle:
		for i := start + 1; i < len(f.data); i++ {
			switch f.data[i] {
			case '\\':
				i++
			case '"':
				return i + 1
			}
		}
	case yaml.SingleQuotedStyle:
		for i := start + 1; i < len(f.data); i++ {
			if f.data[i] == '\'' {
				if i+1 < len(f.data) && f.data[i+1] == '\'' {
					i++
					continue
				}
				return i + 1
			}
		}
	}
	return start + len(n.Value)
}

// removePool deletes the pool's node, and in block style its head comment.
func (f *clusterFile) removePool(pool *yaml.Node) []byte {
	items := f.pools.Content
	i := 0
	for items[i] != pool {
		i++
	}
	if isFlow(f.pools) {
		start, end := f.offset(pool), f.flowEnd(f.offset(pool))
		switch {
		case i+1 < len(items): // up to the next item, with the comma
			end = f.offset(items[i+1])
		case i > 0: // from the end of the previous one, with the comma
			start = f.flowEnd(f.offset(items[i-1]))
		}
		return f.splice(edit{start, end, ""})
	}
	first := f.headLine(f.dashLine(pool))
	last := f.lastLine(pool)
	// Keep the spacing between pools: when blank lines separate them, one
	// gap goes with the pool, the one after it or else the one before.
	if (first > 0 && blank(f.line(first-1))) || (i == 0 && len(items) > 1) {
		switch {
		case last+1 < len(f.lines) && blank(f.line(last+1)):
			for last+1 < len(f.lines) && blank(f.line(last+1)) {
				last++
			}
		default:
			for first > 0 && blank(f.line(first-1)) {
				first--
			}
		}
	}
	edits := []edit{{f.lines[first], f.lineEnd(last), ""}}
	if len(items) == 1 {
		// The key stays, as an empty list rather than a null.
		colon := f.afterColon(f.poolsKey)
		edits = append(edits, edit{colon, colon, " []"})
	}
	return f.splice(edits...)
}

// addPool appends a pool to spec.servicePools, creating the key if the
// file has none, written like the file's first pool.
func (f *clusterFile) addPool(name string, addrs []string) []byte {
	switch {
	case f.poolsKey == nil && isFlow(f.spec):
		at := f.beforeClose(f.offset(f.spec))
		return f.splice(edit{at, at, ", servicePools: [" + flowPool(name, addrs, quotes{}) + "]"})
	case f.poolsKey == nil:
		indent := f.spec.Column - 1
		text := spaces(indent) + "servicePools:" + f.nl + f.defaultStyle(indent).text(name, addrs, f.nl)
		at := f.lineEnd(f.lastLine(f.spec))
		return f.splice(edit{at, at, f.lineBreakBefore(at) + text})
	case isFlow(f.pools) && len(f.pools.Content) > 0, isFlow(f.pools) && isFlow(f.spec):
		at := f.beforeClose(f.offset(f.pools))
		if len(f.pools.Content) == 0 {
			return f.splice(edit{at, at, flowPool(name, addrs, quotes{})})
		}
		return f.splice(edit{at, at, ", " + flowPool(name, addrs, quotesOf(f.pools.Content[0]))})
	case isFlow(f.pools) || isNull(f.pools):
		// `servicePools: []` or nothing: start a block list under the key.
		colon := f.afterColon(f.poolsKey)
		valueEnd := colon
		if isFlow(f.pools) {
			valueEnd = f.flowEnd(f.offset(f.pools))
		} else if f.pools.Line == f.poolsKey.Line && f.pools.Value != "" {
			valueEnd = f.offset(f.pools) + len(f.pools.Value)
		}
		at := f.lineEnd(f.poolsKey.Line - 1)
		text := f.defaultStyle(f.poolsKey.Column-1).text(name, addrs, f.nl)
		return f.splice(edit{colon, valueEnd, ""}, edit{at, at, f.lineBreakBefore(at) + text})
	default:
		text := f.styleOf().text(name, addrs, f.nl)
		at := f.lineEnd(f.lastLine(f.pools))
		return f.splice(edit{at, at, f.lineBreakBefore(at) + text})
	}
}

// poolStyle is how a file writes a pool in block style: columns (from 0)
// of the item's dash and keys, and of the address items' dashes and values.
type poolStyle struct {
	flowItem       bool // - {name: a, addresses: [...]}
	dash, key      int
	flowAddrs      bool
	addrDash, addr int
	gap            bool // a blank line between pools
	quotes         quotes
}

func (s poolStyle) text(name string, addrs []string, nl string) string {
	var b strings.Builder
	if s.gap {
		b.WriteString(nl)
	}
	b.WriteString(spaces(s.dash) + "-" + spaces(s.key-s.dash-1))
	if s.flowItem {
		b.WriteString(flowPool(name, addrs, s.quotes) + nl)
		return b.String()
	}
	b.WriteString("name: " + scalar(name, s.quotes.name, false) + nl)
	b.WriteString(spaces(s.key) + "addresses:")
	if s.flowAddrs {
		b.WriteString(" " + flowList(addrs, s.quotes.addr, false) + nl)
		return b.String()
	}
	b.WriteString(nl)
	for _, a := range addrs {
		b.WriteString(spaces(s.addrDash) + "-" + spaces(s.addr-s.addrDash-1) + scalar(a, s.quotes.addr, false) + nl)
	}
	return b.String()
}

// styleOf copies the style of the file's first pool.
func (f *clusterFile) styleOf() poolStyle {
	items := f.pools.Content
	first := items[0]
	s := f.defaultStyle(f.poolsKey.Column - 1)
	s.dash, s.key = f.pools.Column-1, first.Column-1
	s.flowItem = isFlow(first)
	s.quotes = quotesOf(first)
	if _, list := mapValue(first, "addresses"); list != nil && list.Kind == yaml.SequenceNode && len(list.Content) > 0 {
		s.flowAddrs = isFlow(list)
		if !s.flowAddrs {
			s.addrDash, s.addr = list.Column-1, list.Content[0].Column-1
		}
	}
	if len(items) > 1 {
		head := f.headLine(f.dashLine(items[1]))
		s.gap = head > 0 && blank(f.line(head-1))
	}
	return s
}

// defaultStyle is for the first pool under a key at column keyCol: a block
// list indented as the file indents its other block lists under keys.
func (f *clusterFile) defaultStyle(keyCol int) poolStyle {
	indent := 2
	for i, n := range f.order {
		if n.Kind == yaml.SequenceNode && !isFlow(n) && i > 0 && f.order[i-1].Kind == yaml.ScalarNode {
			indent = n.Column - f.order[i-1].Column
			break
		}
	}
	dash := keyCol + indent
	return poolStyle{dash: dash, key: dash + 2, addrDash: dash + 2 + indent, addr: dash + 4 + indent}
}

func poolName(pool *yaml.Node) string {
	_, n := mapValue(pool, "name")
	return n.Value
}

// quotes are how a pool quotes its name and addresses (plain, 'single' or
// "double"), for new values to copy.
type quotes struct{ name, addr yaml.Style }

const quoteStyles = yaml.SingleQuotedStyle | yaml.DoubleQuotedStyle

func quotesOf(pool *yaml.Node) quotes {
	var q quotes
	if _, n := mapValue(pool, "name"); n != nil {
		q.name = n.Style & quoteStyles
	}
	if _, list := mapValue(pool, "addresses"); list != nil && len(list.Content) > 0 {
		q.addr = list.Content[0].Style & quoteStyles
	}
	return q
}

func flowPool(name string, addrs []string, q quotes) string {
	return "{name: " + scalar(name, q.name, true) + ", addresses: " + flowList(addrs, q.addr, false) + "}"
}

// flowList writes [a, b], or [ a, b ] padded.
func flowList(addrs []string, style yaml.Style, padded bool) string {
	pad := ""
	if padded {
		pad = " "
	}
	quoted := make([]string, len(addrs))
	for i, a := range addrs {
		quoted[i] = scalar(a, style, true)
	}
	return "[" + pad + strings.Join(quoted, ", ") + pad + "]"
}

// scalar writes s as YAML would in the given quoting style, and
// double-quoted (JSON's quoting is YAML's) where a plain scalar would
// change the structure around it.
func scalar(s string, style yaml.Style, flow bool) string {
	// A plain string goes through Marshal's own path, which also quotes
	// YAML 1.1 booleans such as "on": the decoder behind Parse reads 1.1.
	var v any = s
	if style != 0 {
		v = &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s, Style: style}
	}
	out, err := yaml.Marshal(v)
	plain := strings.TrimSuffix(string(out), "\n")
	if err != nil || strings.Contains(plain, "\n") || (flow && strings.ContainsAny(plain, ",[]{}")) {
		q, _ := json.Marshal(s)
		return string(q)
	}
	return plain
}

func spaces(n int) string { return strings.Repeat(" ", max(n, 0)) }
