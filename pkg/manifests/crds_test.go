package manifests

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
)

// crdDoc is the part of the generated CRD these tests read.
type crdDoc struct {
	Spec struct {
		Group string `json:"group"`
		Names struct {
			Kind string `json:"kind"`
		} `json:"names"`
		Scope    string `json:"scope"`
		Versions []struct {
			Name         string         `json:"name"`
			Served       bool           `json:"served"`
			Storage      bool           `json:"storage"`
			Subresources map[string]any `json:"subresources"`
			Schema       struct {
				OpenAPIV3Schema struct {
					Properties struct {
						Spec struct {
							Rules []struct {
								Rule    string `json:"rule"`
								Message string `json:"message"`
							} `json:"x-kubernetes-validations"`
							Properties map[string]struct {
								Rules []struct {
									Rule string `json:"rule"`
								} `json:"x-kubernetes-validations"`
							} `json:"properties"`
						} `json:"spec"`
					} `json:"properties"`
				} `json:"openAPIV3Schema"`
			} `json:"schema"`
		} `json:"versions"`
	} `json:"spec"`
}

func clusterVIPsCRDDoc(t *testing.T) crdDoc {
	t.Helper()
	var doc crdDoc
	if err := yaml.Unmarshal(ClusterVIPsCRD(), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Spec.Versions) != 1 {
		t.Fatalf("want one version, got %d", len(doc.Spec.Versions))
	}
	return doc
}

// The resource is the cluster file's apiVersion and kind: one name for
// one thing, whether it is a file or an object.
func TestClusterVIPsCRDNames(t *testing.T) {
	doc := clusterVIPsCRDDoc(t)
	v := doc.Spec.Versions[0]
	if got := doc.Spec.Group + "/" + v.Name; got != v1alpha1.APIVersion {
		t.Errorf("CRD group/version %s, cluster file %s", got, v1alpha1.APIVersion)
	}
	if doc.Spec.Names.Kind != v1alpha1.Kind {
		t.Errorf("CRD kind %s, cluster file %s", doc.Spec.Names.Kind, v1alpha1.Kind)
	}
	if doc.Spec.Scope != "Cluster" || !v.Served || !v.Storage || v.Subresources["status"] == nil {
		t.Errorf("want a served, stored, cluster-scoped version with a status subresource: scope %s, served %v, storage %v, subresources %v",
			doc.Spec.Scope, v.Served, v.Storage, v.Subresources)
	}
}

// The rule that keeps spec.api out of mode poolsOnly names each of
// APISpec's fields (vipctl compares it with the zero APISpec): a field
// added to APISpec must be added to the rule in pkg/apis/v1alpha1/types.go.
func TestClusterVIPsCRDPoolsOnlyRuleNamesEveryAPIField(t *testing.T) {
	rule := specRule(t, "leave spec.api out")
	typ := reflect.TypeFor[v1alpha1.APISpec]()
	for i := 0; i < typ.NumField(); i++ {
		name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
		if !strings.Contains(rule, "has(self.api."+name+")") {
			t.Errorf("the poolsOnly rule on spec.api does not name %s: %s", name, rule)
		}
	}
}

// The CEL rule that keeps spec.api's ports apart counts the defaults a
// port left out gets: they must be SetDefaults' own.
func TestClusterVIPsCRDPortRuleDefaults(t *testing.T) {
	doc := clusterVIPsCRDDoc(t)
	var rule string
	for _, r := range doc.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties.Spec.Properties["api"].Rules {
		if strings.Contains(r.Rule, "self.loadBalancerPort : ") {
			rule = r.Rule
		}
	}
	if rule == "" {
		t.Fatal("no rule on spec.api's ports")
	}
	for field, port := range map[string]int{
		"port":                     v1alpha1.DefaultAPIPort,
		"loadBalancerPort":         v1alpha1.DefaultLoadBalancerPort,
		"healthPort":               v1alpha1.DefaultHealthPort,
		"internalLoadBalancerPort": v1alpha1.DefaultInternalLoadBalancerPort,
	} {
		if !strings.Contains(rule, fmt.Sprintf(" %d", port)) {
			t.Errorf("the port rule does not count %s's default %d: %s", field, port, rule)
		}
	}
}

func specRule(t *testing.T, message string) string {
	t.Helper()
	for _, r := range clusterVIPsCRDDoc(t).Spec.Versions[0].Schema.OpenAPIV3Schema.Properties.Spec.Rules {
		if strings.Contains(r.Message, message) {
			return r.Rule
		}
	}
	t.Fatalf("no rule on spec with the message %q", message)
	return ""
}
