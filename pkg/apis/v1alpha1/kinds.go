package v1alpha1

import (
	"bytes"
	"encoding/json"
	"reflect"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// KindErrors is kindErrors for another input than the cluster file (a
// node list): every value of the JSON document js whose kind does not fit
// the field of t it would decode into (a string where a list is wanted),
// in YAML's words and at its full path with list indices, where
// encoding/json names a Go type and drops the indices. A document that is
// not a mapping is named as such.
func KindErrors(js []byte, t reflect.Type) field.ErrorList {
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || v == nil {
		return nil
	}
	if _, ok := v.(map[string]any); !ok {
		return field.ErrorList{field.Invalid(orFile(nil), field.OmitValueType{}, "must be a mapping, not "+kindOf(v))}
	}
	return kindCheck(v, t, nil)
}
