package machineconfig

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/url"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// GVR is the MachineConfig resource of the machine-config operator's API.
var GVR = schema.GroupVersionResource{Group: "machineconfiguration.openshift.io", Version: "v1", Resource: "machineconfigs"}

// Fetch reads the MachineConfig name from the cluster and returns what it
// lays down at path (FileData).
func Fetch(ctx context.Context, c dynamic.Interface, name, path string) ([]byte, bool, error) {
	obj, err := c.Resource(GVR).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, false, err
	}
	return FileData(obj, path)
}

// FileData is what a MachineConfig, as the API returns it, lays down at
// path, and whether it lays anything there: the way to check what nodes
// will get after `vipctl update` rewrote the MachineConfigs. It reads the
// data URLs dataURL writes.
func FileData(mc *unstructured.Unstructured, path string) ([]byte, bool, error) {
	files, _, err := unstructured.NestedSlice(mc.Object, "spec", "config", "storage", "files")
	if err != nil {
		return nil, false, err
	}
	for _, f := range files {
		m, ok := f.(map[string]any)
		if !ok || m["path"] != path {
			continue
		}
		src, _, _ := unstructured.NestedString(m, "contents", "source")
		if rest, ok := strings.CutPrefix(src, "data:;base64,"); ok {
			b, err := base64.StdEncoding.DecodeString(rest)
			return b, true, err
		}
		rest, ok := strings.CutPrefix(src, "data:,")
		if !ok {
			return nil, true, fmt.Errorf("%s: contents.source %.40q is not a data URL", path, src)
		}
		b, err := url.PathUnescape(rest)
		return []byte(b), true, err
	}
	return nil, false, nil
}
