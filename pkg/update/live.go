package update

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/version"
)

// LiveStored is Live with the fields of the ConfigMap this vipctl does
// not know (a newer one wrote them: cluster.ReadConfigMap), for a reader
// that tells of them (vipctl status) or refuses to write over them
// (Run, NewerFieldsError).
func (c Cluster) LiveStored(ctx context.Context) (*v1alpha1.ClusterVIPs, v1alpha1.UnknownFields, *corev1.ConfigMap, error) {
	cm, err := c.Kube.CoreV1().ConfigMaps(c.Namespace).Get(ctx, v1alpha1.ConfigMapName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil, nil, nil
	}
	if err != nil {
		return nil, nil, nil, err
	}
	cfg, unknown, err := cluster.ReadConfigMap(cm)
	if err != nil {
		return nil, nil, cm, err
	}
	return cfg, unknown, cm, nil
}

// NewerFieldsError refuses an update over a ConfigMap a newer vipctl
// wrote: this one would write it back without the fields it does not
// know, and the newer sidecars would lose what they were told. Only the
// newer vipctl can change it, or remove those fields first (a rollback,
// docs/upgrade.md).
func NewerFieldsError(cm *corev1.ConfigMap, unknown v1alpha1.UnknownFields) error {
	return fmt.Errorf("configmap %s/%s was written by a newer vipctl than this one (%s): it holds fields this one does not know and would drop: %s; "+
		"edit it with the vipctl that wrote it, or remove those fields with it first",
		cm.Namespace, cm.Name, version.Get(), strings.Join(unknown, ", "))
}
