package status

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1/crd"
)

// watchObjects adds an informer on the ClusterVIPs objects (one or two
// a cluster), calling handler, when the resource is served and this
// user may list it: the watch then shows the object's verdict and, on a
// migrated cluster, reads its config from the object as the one-shot
// status does (LiveSource). Without, the frames are as before.
func (c *caches) watchObjects(ctx context.Context, dyn dynamic.Interface, handler cache.ResourceEventHandler) error {
	if dyn == nil {
		return nil
	}
	if _, err := dyn.Resource(crd.Resource).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		return nil
	}
	f := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	inf := f.ForResource(crd.Resource)
	if _, err := inf.Informer().AddEventHandler(handler); err != nil {
		return err
	}
	c.clusterVIPs, c.dynamic = inf.Lister(), f
	return nil
}

// clusterVIPsObject is the cached object name, nil without one.
func (c *caches) clusterVIPsObject(name string) *unstructured.Unstructured {
	if c.clusterVIPs == nil {
		return nil
	}
	obj, err := c.clusterVIPs.Get(name)
	if err != nil {
		return nil
	}
	u, _ := obj.(*unstructured.Unstructured)
	return u
}
