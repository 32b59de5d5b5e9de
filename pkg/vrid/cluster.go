package vrid

import "github.com/vipctl/vipctl/pkg/apis/v1alpha1"

// RequestFor builds the ID request of a validated cluster file: every VRRP
// instance key in declaration order, its pins and its avoided IDs.
func RequestFor(c *v1alpha1.ClusterVIPs) Request {
	req := Request{Cluster: c.Metadata.Name, Overrides: map[Key]uint8{}}
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
// instance key. extra keys (instances the sidecar creates at run time,
// such as externalTrafficPolicy Local Services) come after the file's, so
// they never move an ID of the file's.
func ForCluster(c *v1alpha1.ClusterVIPs, extra ...Key) (map[Key]uint8, error) {
	req := RequestFor(c)
	req.Keys = append(req.Keys, extra...)
	a, err := Assign(req)
	if err != nil {
		return nil, err
	}
	ids := make(map[Key]uint8, len(a.Entries))
	for _, e := range a.Entries {
		ids[e.Key] = e.ID
	}
	return ids, nil
}
