package update

import (
	"fmt"
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

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
