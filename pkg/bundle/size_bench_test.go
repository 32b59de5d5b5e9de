package bundle_test

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/bundle"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/machineconfig"
	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/pkg/openshiftrelease"
	"github.com/vipctl/vipctl/test/fixture"
)

// BenchmarkMachineConfigSize is `vipctl render --nodes` with the
// `oc get nodes -o yaml` of a 2000-node OpenShift cluster (about 20 KB a
// Node), reduced to the MachineConfigs: their YAML, the
// last-applied-configuration annotation `oc apply` adds (the apiserver
// refuses more than 256 KiB of annotations on one object) and the object
// then stored (etcd refuses requests over 1.5 MiB). For the record of why
// the bootstrap node list holds the control plane only (docs/render.md),
// it also reports what shipping every node would take: the slim list of
// all 2000 nodes as a MachineConfig file, plain and gzipped.
func BenchmarkMachineConfigSize(b *testing.B) {
	const nodes = 2000
	items := fixture.OpenShiftNodes(nodes)
	// What `oc get nodes -o yaml` writes, for the size of a Node.
	input, err := yaml.Marshal(corev1.NodeList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "List"}, Items: items})
	if err != nil {
		b.Fatal(err)
	}
	c, err := v1alpha1.Parse([]byte(fixture.OpenShiftCluster))
	if err != nil {
		b.Fatal(err)
	}
	var files []bundle.File
	for b.Loop() {
		if files, err = bundle.Build(c, bundle.Options{BootstrapNodes: items}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(input))/nodes/1024, "KiB-per-input-node")
	for _, f := range files {
		role, ok := strings.CutPrefix(f.Path, "machineconfigs/50-vipctl-")
		if !ok {
			continue
		}
		role = strings.TrimSuffix(role, ".yaml")
		annotation, stored := applied(b, f.Data)
		b.ReportMetric(float64(len(f.Data))/1024, "KiB-"+role)
		b.ReportMetric(float64(annotation)/1024, "KiB-"+role+"-annotation")
		b.ReportMetric(float64(stored)/1024, "KiB-"+role+"-applied")
	}

	// The alternatives the decision weighed.
	slim, skipped := cluster.SlimNodes(items)
	if len(skipped) > 0 {
		b.Fatal(skipped)
	}
	all, err := cluster.MarshalNodeList(slim)
	if err != nil {
		b.Fatal(err)
	}
	mc, err := machineconfig.Build("all-nodes", "master", openshiftrelease.Default(), []onnode.File{{Path: onnode.BootstrapNodesPath, Mode: 0o644, Data: all}})
	if err != nil {
		b.Fatal(err)
	}
	data, err := machineconfig.Marshal(mc)
	if err != nil {
		b.Fatal(err)
	}
	var gz bytes.Buffer
	w, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	if _, err := w.Write(all); err != nil {
		b.Fatal(err)
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(len(data))/1024, "KiB-all-nodes-file")
	b.ReportMetric(float64(base64.StdEncoding.EncodedLen(gz.Len()))/1024, "KiB-all-nodes-gzip")
}

// applied is the size of the last-applied-configuration annotation
// `oc apply` adds to a MachineConfig file's object, and of the object
// with it.
func applied(b *testing.B, data []byte) (annotation, object int) {
	b.Helper()
	var obj unstructured.Unstructured
	if err := yaml.Unmarshal(data, &obj.Object); err != nil {
		b.Fatal(err)
	}
	last, err := fixture.LastApplied(&obj)
	if err != nil {
		b.Fatal(err)
	}
	obj.SetAnnotations(map[string]string{corev1.LastAppliedConfigAnnotation: last})
	js, err := obj.MarshalJSON()
	if err != nil {
		b.Fatal(err)
	}
	return len(corev1.LastAppliedConfigAnnotation) + len(last), len(js)
}
