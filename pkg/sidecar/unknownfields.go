package sidecar

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
)

// ReasonConfigFieldsUnknown is the Event a sidecar posts on its Node when
// a copy of the config it reads holds fields a newer vipctl wrote: during
// an upgrade or after a rollback (docs/upgrade.md, "Version skew"). The
// sidecar ignores them and keeps working on the fields it knows.
const ReasonConfigFieldsUnknown = "ConfigFieldsUnknown"

// The copies of the config the sidecar reads, as the gauge
// config_unknown_fields labels them.
const (
	unknownInConfigMap = "configmap"
	unknownInFile      = "file"
)

// reportUnknownFields says which fields of a copy of the config (object:
// unknownInConfigMap or unknownInFile, the cluster.yaml the MachineConfig
// laid down) this sidecar ignores: the gauge on every read, a log line
// and a Warning Event on the Node once per copy and list of fields, not on
// every sync.
func (s *Sidecar) reportUnknownFields(object, where string, unknown v1alpha1.UnknownFields) {
	s.m.UnknownFields.WithLabelValues(object).Set(float64(len(unknown)))
	msg := unknown.String()
	s.mu.Lock()
	if s.unknownFields == nil {
		s.unknownFields = map[string]string{}
	}
	same := s.unknownFields[object] == msg
	s.unknownFields[object] = msg
	s.mu.Unlock()
	if same || msg == "" {
		return
	}
	s.log.Warn(where+": "+msg, "fields", []string(unknown))
	s.rec.Event(s.nodeRef, corev1.EventTypeWarning, ReasonConfigFieldsUnknown, truncate(where+": "+msg))
}
