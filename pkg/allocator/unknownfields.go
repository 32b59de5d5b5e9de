package allocator

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
)

// ReasonConfigFieldsUnknown is the Event the allocator posts on the
// ConfigMap when it holds fields a newer vipctl wrote: during an upgrade
// or after a rollback (docs/upgrade.md, "Version skew"). The allocator
// ignores them and allocates from the pools as it reads them.
const ReasonConfigFieldsUnknown = "ConfigFieldsUnknown"

// reportUnknownFields sets the gauge on every read of the ConfigMap, and
// logs and posts the Event once per list of fields and leader term.
func (t *term) reportUnknownFields(cm *corev1.ConfigMap, unknown v1alpha1.UnknownFields) {
	t.c.m.UnknownFields.Set(float64(len(unknown)))
	msg := unknown.String()
	if msg == t.unknown {
		return
	}
	t.unknown = msg
	if msg == "" {
		return
	}
	t.c.log.Warn("configmap "+cm.Namespace+"/"+cm.Name+": "+msg, "fields", []string(unknown))
	t.rec.Event(cm, corev1.EventTypeWarning, ReasonConfigFieldsUnknown, truncate(msg))
}
