package v1alpha1

import (
	"fmt"
	"os"
	"strings"

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
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("not valid YAML: %w", err)
	}
	var c ClusterVIPs
	strict, err := kjson.UnmarshalStrict(js, &c)
	if err != nil {
		return nil, fmt.Errorf("decoding: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	var errs field.ErrorList
	for _, e := range strict {
		errs = append(errs, strictError(e))
	}
	if c.APIVersion != APIVersion {
		errs = append(errs, field.NotSupported(field.NewPath("apiVersion"), c.APIVersion, []string{APIVersion}))
	}
	if c.Kind != Kind {
		errs = append(errs, field.NotSupported(field.NewPath("kind"), c.Kind, []string{Kind}))
	}
	if len(errs) > 0 {
		return nil, &ValidationError{Errors: errs}
	}
	return &c, nil
}

// strictError turns sigs.k8s.io/json's `unknown field "spec.foo"` into a
// field error so all decode errors read alike.
func strictError(e error) *field.Error {
	msg := e.Error()
	for _, kind := range []string{"unknown field", "duplicate field"} {
		if rest, ok := strings.CutPrefix(msg, kind+" "); ok {
			path := strings.Trim(rest, `"`)
			return &field.Error{Type: field.ErrorTypeInvalid, Field: path, BadValue: field.OmitValueType{}, Detail: kind}
		}
	}
	return field.Invalid(field.NewPath(""), nil, msg)
}
