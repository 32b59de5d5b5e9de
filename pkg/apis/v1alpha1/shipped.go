package v1alpha1

import "sigs.k8s.io/yaml"

// Shipped is the copy of the config vipctl writes into the cluster: the
// vipctl-config ConfigMap and the cluster.yaml every MachineConfig lays
// on the nodes. metadata.labels and metadata.annotations are the
// author's own and stay in the file: copied, 1 MiB of annotations would
// push the ConfigMap past what the API server stores and every
// MachineConfig with it, and editing one would roll (reboot) every node.
func (c *ClusterVIPs) Shipped() *ClusterVIPs {
	out := *c
	out.Metadata = ObjectMeta{Name: c.Metadata.Name}
	return &out
}

// ShippedYAML is Shipped as the YAML the ConfigMap and the nodes hold.
func (c *ClusterVIPs) ShippedYAML() ([]byte, error) { return yaml.Marshal(c.Shipped()) }
