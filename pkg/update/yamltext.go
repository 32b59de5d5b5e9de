package update

import (
	"bytes"
	"strings"
	"unicode/utf8"

	yaml "go.yaml.in/yaml/v3"
)

// edit replaces data[start:end] with text.
type edit struct {
	start, end int
	text       string
}

// splice applies edits that do not overlap, given in any order.
func (f *clusterFile) splice(edits ...edit) []byte {
	out := append([]byte(nil), f.data...)
	for len(edits) > 0 {
		last := 0
		for i, e := range edits {
			if e.start > edits[last].start {
				last = i
			}
		}
		e := edits[last]
		out = append(out[:e.start], append([]byte(e.text), out[e.end:]...)...)
		edits = append(edits[:last], edits[last+1:]...)
	}
	return out
}

// offset is the byte offset of n's first character.
func (f *clusterFile) offset(n *yaml.Node) int {
	off := f.lines[n.Line-1]
	for col := 1; col < n.Column && off < len(f.data); col++ {
		_, size := utf8.DecodeRune(f.data[off:])
		off += size
	}
	return off
}

// line is the text of line l (from 0) without its line ending.
func (f *clusterFile) line(l int) string {
	return strings.TrimRight(string(f.data[f.lines[l]:f.lineEnd(l)]), "\r\n")
}

// lineEnd is the offset just past line l's line ending.
func (f *clusterFile) lineEnd(l int) int {
	if l+1 < len(f.lines) {
		return f.lines[l+1]
	}
	return len(f.data)
}

// lineBreakBefore is what inserting whole lines at offset at needs first:
// a line ending when the file's last line has none.
func (f *clusterFile) lineBreakBefore(at int) string {
	if at > 0 && f.data[at-1] != '\n' {
		return f.nl
	}
	return ""
}

// lastLine is the last line (from 0) of block node n: the last content
// line before the node that follows it. Blank and comment lines between
// them stay with what follows, and so does a dash alone on its line, which
// opens the next list item.
func (f *clusterFile) lastLine(n *yaml.Node) int {
	l := len(f.lines) - 1
	if i := f.after[n]; i < len(f.order) {
		l = f.order[i].Line - 2
	}
	for l > n.Line-1 && (!content(f.line(l)) || strings.TrimSpace(f.line(l)) == "-") {
		l--
	}
	return l
}

// dashLine is the line (from 0) of the dash that starts block list item n.
func (f *clusterFile) dashLine(n *yaml.Node) int {
	off := f.offset(n) - 1
	for off > 0 && f.data[off] != '-' {
		off--
	}
	l := n.Line - 1
	for l > 0 && f.lines[l] > off {
		l--
	}
	return l
}

// headLine is the first line (from 0) of the comment lines right above l.
func (f *clusterFile) headLine(l int) int {
	for l > 0 && strings.HasPrefix(strings.TrimSpace(f.line(l-1)), "#") {
		l--
	}
	return l
}

// afterColon is the offset just past the colon that ends mapping key k.
func (f *clusterFile) afterColon(k *yaml.Node) int {
	off := f.offset(k)
	return off + bytes.IndexByte(f.data[off:], ':') + 1
}

// flowEnd is the offset just past the bracket that closes the flow
// collection opening at off.
func (f *clusterFile) flowEnd(off int) int {
	depth := 0
	for i := off; i < len(f.data); i++ {
		switch c := f.data[i]; c {
		case '[', '{':
			depth++
		case ']', '}':
			if depth--; depth == 0 {
				return i + 1
			}
		case '"', '\'':
			for i++; i < len(f.data) && f.data[i] != c; i++ {
				if c == '"' && f.data[i] == '\\' {
					i++
				}
			}
		case '#':
			if i > 0 && (f.data[i-1] == ' ' || f.data[i-1] == '\t') {
				for i < len(f.data) && f.data[i] != '\n' {
					i++
				}
			}
		}
	}
	return len(f.data)
}

// beforeClose is where an entry appended to the flow collection opening
// at off goes: after its last entry, before the closing bracket's padding.
func (f *clusterFile) beforeClose(off int) int {
	at := f.flowEnd(off) - 1
	for at > off+1 && (f.data[at-1] == ' ' || f.data[at-1] == '\t') {
		at--
	}
	return at
}

func blank(line string) bool { return strings.TrimSpace(line) == "" }

// content tells lines that hold YAML from blank lines, comments and
// document markers.
func content(line string) bool {
	t := strings.TrimSpace(line)
	return t != "" && !strings.HasPrefix(t, "#") && t != "---" && t != "..."
}
