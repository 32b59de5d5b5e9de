package v1alpha1

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"unicode/utf8"

	yamlv3 "go.yaml.in/yaml/v3"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Load reads, strictly decodes, defaults and validates a ClusterVIPs file.
func Load(path string) (*ClusterVIPs, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Parse is Load without the file: decode, default, validate. Every problem
// is reported at once, each with its field path.
func Parse(data []byte) (*ClusterVIPs, error) {
	c, err := Decode(data)
	if err != nil {
		return nil, err
	}
	return defaultValid(c)
}

// defaultValid is the step of Parse after decoding: defaults, then every
// validation error at once.
func defaultValid(c *ClusterVIPs) (*ClusterVIPs, error) {
	SetDefaults(c)
	if errs := Validate(c); len(errs) > 0 {
		return nil, &ValidationError{Errors: errs}
	}
	return c, nil
}

// ValidationError lists every problem of a config, one per line.
type ValidationError struct {
	Errors field.ErrorList
}

func (e *ValidationError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d invalid field(s):", len(e.Errors))
	for _, err := range e.Errors {
		b.WriteString("\n  " + err.Error())
	}
	return b.String()
}

// Decode only decodes: unknown and duplicate fields are errors naming their
// path, so a misspelt option never silently falls back to its default.
func Decode(data []byte) (*ClusterVIPs, error) {
	c, _, err := decode(data, false)
	return c, err
}

// decode is Decode; with tolerant, fields ClusterVIPs does not have are
// returned by path instead of refused (DecodeStored).
func decode(data []byte, tolerant bool) (*ClusterVIPs, []string, error) {
	doc, data, err := singleDocument(data)
	if err != nil {
		return nil, nil, err
	}
	if errs := yamlOnlyValues(doc); len(errs) > 0 {
		return nil, nil, &ValidationError{Errors: errs}
	}
	js, err := yaml.YAMLToJSONStrict(releaseAsWritten(doc, data))
	if err != nil {
		// The conversion's own words name JSON, which the file is not.
		return nil, nil, fmt.Errorf("not valid YAML: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	if errs := kindErrors(js); len(errs) > 0 {
		return nil, nil, &ValidationError{Errors: errs}
	}
	var c ClusterVIPs
	strict, err := kjson.UnmarshalStrict(js, &c)
	if err != nil {
		// kindErrors finds every mismatch this can report; should one
		// slip through, its words still name no Go type.
		return nil, nil, fmt.Errorf("decoding: %s", goTypesOut(strings.TrimPrefix(err.Error(), "json: ")))
	}
	var errs field.ErrorList
	var unknown []string
	for _, e := range strict {
		fe := strictError(e)
		if tolerant && fe.Detail == unknownField {
			unknown = append(unknown, fe.Field)
			continue
		}
		errs = append(errs, fe)
	}
	errs = append(errs, explicitZeros(js)...)
	if c.APIVersion != APIVersion {
		errs = append(errs, field.NotSupported(field.NewPath("apiVersion"), c.APIVersion, []string{APIVersion}))
	}
	if c.Kind != Kind {
		errs = append(errs, field.NotSupported(field.NewPath("kind"), c.Kind, []string{Kind}))
	}
	if len(errs) > 0 {
		return nil, nil, &ValidationError{Errors: errs}
	}
	return &c, unknown, nil
}

// singleDocument refuses a second YAML document: the JSON conversion reads
// only the first, so anything after a "---" (a second ClusterVIPs, a pool
// pasted below the marker) would be silently ignored. Empty documents (a
// "---" with nothing but comments after it, before or after the one that
// counts) are no second document. It returns the one document's node
// tree (nil for an empty file) and the data the JSON conversion is to
// read: with the empty documents before it blanked out, line for line,
// so that the conversion's first document is that one and every line
// number stays right.
func singleDocument(data []byte) (*yamlv3.Node, []byte, error) {
	dec := yamlv3.NewDecoder(bytes.NewReader(data))
	var doc *yamlv3.Node
	for {
		var next yamlv3.Node
		err := dec.Decode(&next)
		switch {
		case errors.Is(err, io.EOF):
			if doc == nil {
				return nil, data, nil // empty: the field errors say what is missing
			}
			return doc, blankLinesBefore(data, doc.Line), nil
		case err != nil:
			return nil, nil, fmt.Errorf("not valid YAML: %w", err)
		case emptyDocument(&next):
			continue
		case doc != nil:
			return nil, nil, fmt.Errorf("line %d: a second YAML document; the file must hold exactly one ClusterVIPs", next.Line)
		}
		doc = &next
	}
}

// emptyDocument tells a document with nothing in it (a bare "---", or
// one with comments alone) from one that holds something, if only an
// explicit null.
func emptyDocument(n *yamlv3.Node) bool {
	if n.Kind != yamlv3.DocumentNode || len(n.Content) != 1 {
		return false
	}
	c := n.Content[0]
	return c.Kind == yamlv3.ScalarNode && c.Tag == "!!null" && c.Value == "" && c.Style == 0
}

// blankLinesBefore empties the lines before line (1-based), keeping their
// line breaks.
func blankLinesBefore(data []byte, line int) []byte {
	off := offset(data, line, 1)
	if line <= 1 || off < 0 {
		return data
	}
	out := make([]byte, 0, len(data))
	out = append(out, bytes.Repeat([]byte{'\n'}, line-1)...)
	return append(out, data[off:]...)
}

// releaseAsWritten quotes an unquoted spec.openshiftRelease in place.
// YAML reads `openshiftRelease: 4.20` as the number 4.2, which names
// another release; the text as written is the release meant, and the
// node tree still has it. Quoting it where it stands keeps every line
// number of later errors right. Anything else (a quoted value, an alias, a
// scalar whose text is not found where the parser says) is left as it is.
func releaseAsWritten(doc *yamlv3.Node, data []byte) []byte {
	v := mappingValue(mappingValue(doc, "spec"), "openshiftRelease")
	if v == nil || v.Kind != yamlv3.ScalarNode || v.Style != 0 || (v.Tag != "!!float" && v.Tag != "!!int") {
		return data
	}
	off := offset(data, v.Line, v.Column)
	if off < 0 || !bytes.HasPrefix(data[off:], []byte(v.Value)) {
		return data
	}
	out := make([]byte, 0, len(data)+2)
	out = append(out, data[:off]...)
	out = strconv.AppendQuote(out, v.Value)
	return append(out, data[off+len(v.Value):]...)
}

// mappingValue is the value of key in a mapping node (or a document whose
// root is one); nil when there is none.
func mappingValue(n *yamlv3.Node, key string) *yamlv3.Node {
	if n != nil && n.Kind == yamlv3.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	if n == nil || n.Kind != yamlv3.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// offset is the byte offset of a 1-based line and column (in characters,
// as the YAML parser counts them); -1 when data has no such place.
func offset(data []byte, line, column int) int {
	off := 0
	for l := 1; l < line; l++ {
		i := bytes.IndexByte(data[off:], '\n')
		if i < 0 {
			return -1
		}
		off += i + 1
	}
	for c := 1; c < column; c++ {
		if off >= len(data) || data[off] == '\n' {
			return -1
		}
		_, size := utf8.DecodeRune(data[off:])
		off += size
	}
	return off
}

// explicitZeros refuses a 0 written where 0 means "use the default":
// defaulting cannot tell "instances: 0" from a missing field and would
// silently turn it into 2.
func explicitZeros(js []byte) field.ErrorList {
	var raw struct {
		Spec struct {
			ServicePools []struct {
				Instances  *int `json:"instances"`
				MaxHolders *int `json:"maxHolders"`
			} `json:"servicePools"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(js, &raw); err != nil {
		return nil // the strict decode reports it
	}
	var errs field.ErrorList
	pools := field.NewPath("spec", "servicePools")
	for i, p := range raw.Spec.ServicePools {
		if p.Instances != nil && *p.Instances == 0 {
			errs = append(errs, field.Invalid(pools.Index(i).Child("instances"), 0, fmt.Sprintf("must be between 1 and %d; leave it out for the default %d", maxPoolInstancesPerFamily, DefaultPoolInstances)))
		}
		if p.MaxHolders != nil && *p.MaxHolders == 0 {
			errs = append(errs, field.Invalid(pools.Index(i).Child("maxHolders"), 0, fmt.Sprintf("must be at least 2; leave it out for the default %d", DefaultPoolMaxHolders)))
		}
	}
	return errs
}

// unknownField is the detail of a field error for a field ClusterVIPs
// does not have.
const unknownField = "unknown field"

// strictError turns sigs.k8s.io/json's `unknown field "spec.foo"` into a
// field error so all decode errors read alike.
func strictError(e error) *field.Error {
	msg := e.Error()
	for _, kind := range []string{unknownField, "duplicate field"} {
		if rest, ok := strings.CutPrefix(msg, kind+" "); ok {
			path := strings.Trim(rest, `"`)
			return &field.Error{Type: field.ErrorTypeInvalid, Field: path, BadValue: field.OmitValueType{}, Detail: kind}
		}
	}
	return field.Invalid(field.NewPath(""), nil, msg)
}
