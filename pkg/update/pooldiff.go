package update

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
)

// poolDiff lists every field of a pool that differs between live (a) and
// desired (b), as "path: old -> new", the path that of the field in the
// desired file (spec.servicePools[index].maxPerNamespace). The fields come
// from the type: one added to v1alpha1.ServicePool is compared without a
// change here (TestPoolDiffComparesEveryField).
func poolDiff(index int, a, b v1alpha1.ServicePool) []string {
	pool := field.NewPath("spec", "servicePools").Index(index)
	av, bv := reflect.ValueOf(a), reflect.ValueOf(b)
	var out []string
	for i := 0; i < av.NumField(); i++ {
		x, y := av.Field(i).Interface(), bv.Field(i).Interface()
		if !reflect.DeepEqual(x, y) {
			out = append(out, fmt.Sprintf("%s: %s -> %s", pool.Child(jsonName(av.Type().Field(i))), compact(x), compact(y)))
		}
	}
	return out
}

// jsonName is a struct field's name in the file: its json tag's.
func jsonName(f reflect.StructField) string {
	return strings.Split(f.Tag.Get("json"), ",")[0]
}

// compact writes a value on one line: lists and maps as JSON (empty ones
// as [] and {}), anything else as YAML (bond0.100, "" for an empty
// string), in JSON when that takes several lines.
func compact(v any) string {
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Slice, reflect.Map:
		if rv.Len() == 0 {
			if rv.Kind() == reflect.Slice {
				return "[]"
			}
			return "{}"
		}
		if js, err := json.Marshal(v); err == nil {
			return string(js)
		}
	}
	data, err := yaml.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	s := strings.TrimSpace(string(data))
	if strings.Contains(s, "\n") {
		if js, err := yaml.YAMLToJSON(data); err == nil {
			return string(js)
		}
	}
	return s
}
