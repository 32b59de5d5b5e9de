package v1alpha1

// Type errors in the words of the file. encoding/json's own say "cannot
// unmarshal string into Go struct field BGPPeer.spec.bgp.peers.bfd of type
// bool": a Go type the author never wrote and a path without the list
// index that says which peer. kindErrors walks the decoded document beside
// the Go type instead and names YAML's kinds (a string, a number, a
// mapping, a list) at the full path, every mismatch at once.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/big"
	"reflect"
	"regexp"
	"slices"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// kindErrors compares the JSON form of the file with ClusterVIPs' fields.
// Unknown fields are left to the strict decoder, which names them.
func kindErrors(js []byte) field.ErrorList {
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil // the strict decode reports it
	}
	if v != nil {
		if _, ok := v.(map[string]any); !ok {
			return field.ErrorList{field.Invalid(orFile(nil), field.OmitValueType{},
				"must be a mapping (apiVersion, kind, metadata, spec), not "+kindOf(v))}
		}
	}
	return kindCheck(v, reflect.TypeFor[ClusterVIPs](), nil)
}

// kindCheck checks v against t at path (nil: the document itself).
func kindCheck(v any, t reflect.Type, path *field.Path) field.ErrorList {
	if v == nil {
		return nil // null leaves the field unset, as the decoder does
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	mismatch := func(want string) field.ErrorList {
		var bad any = field.OmitValueType{}
		switch x := v.(type) {
		case string:
			bad = x
		case json.Number, bool:
			bad = x
		}
		msg := "must be " + want + ", not " + kindOf(v)
		if _, isMapOrList := bad.(field.OmitValueType); !isMapOrList && want == "a string" {
			msg += " (quote it)"
		}
		return field.ErrorList{field.Invalid(path, bad, msg)}
	}
	switch t.Kind() {
	case reflect.String:
		if _, ok := v.(string); !ok {
			return mismatch("a string")
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			return mismatch("true or false")
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, ok := v.(json.Number)
		if !ok {
			return mismatch("a whole number")
		}
		return wholeNumber(n, t, path)
	case reflect.Float32, reflect.Float64:
		if _, ok := v.(json.Number); !ok {
			return mismatch("a number")
		}
	case reflect.Slice:
		list, ok := v.([]any)
		if !ok {
			return mismatch("a list")
		}
		var errs field.ErrorList
		for i, e := range list {
			errs = append(errs, kindCheck(e, t.Elem(), path.Index(i))...)
		}
		return errs
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			return mismatch("a mapping")
		}
		var errs field.ErrorList
		for _, k := range slices.Sorted(maps.Keys(m)) {
			errs = append(errs, kindCheck(m[k], t.Elem(), path.Key(k))...)
		}
		return errs
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return mismatch("a mapping")
		}
		var errs field.ErrorList
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" {
				continue
			}
			if fv, ok := m[name]; ok {
				child := field.NewPath(name)
				if path != nil {
					child = path.Child(name)
				}
				errs = append(errs, kindCheck(fv, f.Type, child)...)
			}
		}
		return errs
	}
	return nil
}

// wholeNumber checks that n is an integer that fits the field's type.
func wholeNumber(n json.Number, t reflect.Type, path *field.Path) field.ErrorList {
	i, ok := new(big.Int).SetString(n.String(), 10)
	if !ok {
		return field.ErrorList{field.Invalid(path, n, "must be a whole number")}
	}
	var lo, hi *big.Int
	if t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uint64 {
		lo, hi = big.NewInt(0), new(big.Int).SetUint64(math.MaxUint64>>(64-t.Bits()))
	} else {
		lo, hi = big.NewInt(math.MinInt64>>(64-t.Bits())), big.NewInt(math.MaxInt64>>(64-t.Bits()))
	}
	if i.Cmp(lo) < 0 || i.Cmp(hi) > 0 {
		return field.ErrorList{field.Invalid(path, n, fmt.Sprintf("must be a whole number from %s to %s", lo, hi))}
	}
	return nil
}

// kindOf names a decoded JSON value's kind as YAML calls it.
func kindOf(v any) string {
	switch v.(type) {
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	}
	return "null"
}

// yamlOnlyValues refuses what YAML can write and the JSON form cannot
// hold, with the field path, before the conversion fails with words about
// JSON: a mapping or a list as a mapping key, and numbers that are not
// finite (.nan, .inf). Aliases are not followed.
func yamlOnlyValues(doc *yamlv3.Node) field.ErrorList {
	if doc == nil || len(doc.Content) != 1 {
		return nil
	}
	var errs field.ErrorList
	var walk func(n *yamlv3.Node, path *field.Path)
	walk = func(n *yamlv3.Node, path *field.Path) {
		switch n.Kind {
		case yamlv3.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				if k.Kind != yamlv3.ScalarNode {
					errs = append(errs, field.Invalid(orFile(path), field.OmitValueType{},
						fmt.Sprintf("line %d: a mapping key must be a plain string, not %s", k.Line, yamlKind(k))))
					continue
				}
				walk(v, childPath(path, k.Value))
			}
		case yamlv3.SequenceNode:
			for i, e := range n.Content {
				walk(e, orFile(path).Index(i))
			}
		case yamlv3.ScalarNode:
			if n.Tag == "!!float" && nonFinite.MatchString(n.Value) {
				errs = append(errs, field.Invalid(orFile(path), n.Value, fmt.Sprintf("line %d: not a finite number; no field takes NaN or infinity", n.Line)))
			}
		}
	}
	walk(doc.Content[0], nil)
	return errs
}

// nonFinite matches YAML's spellings of NaN and infinity.
var nonFinite = regexp.MustCompile(`^[-+]?\.(?i:inf|nan)$`)

func childPath(p *field.Path, name string) *field.Path {
	if p == nil {
		return field.NewPath(name)
	}
	return p.Child(name)
}

// orFile is path, or the file itself at the top.
func orFile(p *field.Path) *field.Path {
	if p == nil {
		return field.NewPath("(file)")
	}
	return p
}

func yamlKind(n *yamlv3.Node) string {
	switch n.Kind {
	case yamlv3.MappingNode:
		return "a mapping"
	case yamlv3.SequenceNode:
		return "a list"
	case yamlv3.AliasNode:
		return "an alias"
	}
	return "a scalar"
}

// goStructField matches encoding/json's "Go struct field T.path of type
// U" and "Go value of type U".
var (
	goStructField = regexp.MustCompile(`Go struct field [A-Za-z0-9_]+\.(\S+) of type \S+`)
	goValue       = regexp.MustCompile(`Go value of type \S+`)
)

// goTypesOut rewrites the decoder's Go types into the file's words.
func goTypesOut(msg string) string {
	msg = goStructField.ReplaceAllString(msg, "field $1")
	return goValue.ReplaceAllString(msg, "a ClusterVIPs")
}
