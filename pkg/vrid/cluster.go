package vrid

import "github.com/vipctl/vipctl/pkg/apis/v1alpha1"

// RequestFor builds the ID request of a validated cluster file: every VRRP
// instance key in declaration order, its pins and its avoided IDs, and in
// mode poolsOnly OpenShift's own API and ingress IDs, kept clear of.
func RequestFor(c *v1alpha1.ClusterVIPs) Request {
	req := Request{Cluster: c.Metadata.Name, Overrides: map[Key]uint8{}, OpenShiftKeepalived: c.PoolsOnly()}
	req.Keys = append(req.Keys, c.InstanceKeys()...)
	for k, id := range c.Spec.VRRP.VirtualRouterIDs {
		req.Overrides[Key(k)] = uint8(id)
	}
	for _, id := range c.Spec.VRRP.AvoidVirtualRouterIDs {
		req.Avoid = append(req.Avoid, uint8(id))
	}
	return req
}

// ForCluster assigns every VRRP ID of a validated cluster file, keyed by
// instance key.
func ForCluster(c *v1alpha1.ClusterVIPs) (map[Key]uint8, error) {
	ids, _, err := ForClusterAnd(c, nil)
	return ids, err
}

// ForClusterAnd is ForCluster plus optional keys: instances the sidecar
// creates at run time (externalTrafficPolicy Local Services), in order,
// after the file's, so they never move an ID of the file's. Those no ID is
// left for are returned, not an error: the file's instances and the
// other Services still render.
func ForClusterAnd(c *v1alpha1.ClusterVIPs, optional []Key) (map[Key]uint8, []Key, error) {
	req := RequestFor(c)
	req.Optional = optional
	a, err := Assign(req)
	if err != nil {
		return nil, nil, err
	}
	ids := make(map[Key]uint8, len(a.Entries))
	for _, e := range a.Entries {
		ids[e.Key] = e.ID
	}
	return ids, a.Unassigned, nil
}
