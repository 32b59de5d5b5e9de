package sidecar

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/cluster"
	"github.com/vipctl/vipctl/pkg/configsource"
	"github.com/vipctl/vipctl/pkg/runtimecfg"
)

// config is the live config (the migrated cluster's ClusterVIPs object,
// else the vipctl-config ConfigMap, else nothing) merged into the static
// one, and where the live config was read (v1alpha1.Source*).
func (s *Sidecar) config() (*v1alpha1.ClusterVIPs, string, error) {
	if s.object != nil {
		// The migrated cluster's object, when it is the live config
		// (its annotation), wins over the ConfigMap.
		c, ok, err := s.object.Get()
		if ok {
			s.reportUnknownFields(unknownInConfigMap, "", nil)
			c, err = s.effective(c, err)
			return c, v1alpha1.SourceObject, err
		}
	}
	objs, err := s.configMap.List(labels.Everything())
	if err != nil {
		return nil, "", err
	}
	for _, o := range objs {
		cm := o.(*corev1.ConfigMap)
		if cm.Name != v1alpha1.ConfigMapName {
			continue
		}
		if s.object != nil && configsource.Migrated(cm) {
			s.object.Wake()
		}
		c, unknown, err := cluster.ReadConfigMap(cm)
		if err == nil {
			s.reportUnknownFields(unknownInConfigMap, "configmap "+cm.Namespace+"/"+cm.Name, unknown)
		}
		c, err = s.effective(c, err)
		return c, v1alpha1.SourceConfigMap, err
	}
	s.m.ConfigInvalid.Set(0)
	s.reportUnknownFields(unknownInConfigMap, "", nil)
	eff, _, err := cluster.Effective(s.static, nil)
	return eff, v1alpha1.SourceFile, err
}

// effective merges the live config c (read with err) into the static
// one; a live config that cannot be read or merged keeps the last valid
// one in force.
func (s *Sidecar) effective(c *v1alpha1.ClusterVIPs, err error) (*v1alpha1.ClusterVIPs, error) {
	if err == nil {
		var eff *v1alpha1.ClusterVIPs
		var drift bool
		eff, drift, err = cluster.Effective(s.static, c)
		if err == nil {
			s.m.ConfigInvalid.Set(0)
			s.m.StaticDrift.Set(b2f(drift))
			s.mu.Lock()
			s.liveDay2 = c
			s.mu.Unlock()
			return eff, nil
		}
	}
	s.m.ConfigInvalid.Set(1)
	s.mu.Lock()
	prev := s.liveDay2
	s.mu.Unlock()
	if prev == nil {
		return nil, &runtimecfg.StepError{Step: "config", Err: err}
	}
	// The live config is broken: keep serving its last valid pools, and
	// say so (a sync error keeps the files as they are).
	return nil, &runtimecfg.StepError{Step: "config", Err: fmt.Errorf("%w (the last valid pools stay in force)", err)}
}
