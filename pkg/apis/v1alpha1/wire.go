package v1alpha1

import "time"

// AnnotationNodeWire is written by each node's sidecar on its own Node:
// what its questions on the wire found for the VIPs of its instances
// where that is not one answer (JSON, see WireViews); absent while every
// VIP is answered once, and removed as the sidecar stops. Since v0.2.0:
// older sidecars write none, and readers skip views older than
// WireViewFresh, which a sidecar killed without the chance to remove
// them leaves behind for an older one.
const AnnotationNodeWire = "vipctl.io/wire"

// WireViewFresh is how old a WireView may be and still count: its
// sidecar confirms a view that holds every WireViewRepublish.
const (
	WireViewFresh     = 15 * time.Minute
	WireViewRepublish = 5 * time.Minute
)

// WireView is what one node heard when it last asked who has one VIP
// (ARP, neighbour solicitation) on its VRRP interface.
type WireView struct {
	Address string `json:"address"`
	// Answers counts the link-layer addresses that answered, the node
	// itself included while it has the address.
	Answers int `json:"answers"`
	// Strangers are the answering link-layer addresses that are no
	// member's of the VIP's instance.
	Strangers []string `json:"strangers,omitempty"`
	// At is when the node last found this.
	At time.Time `json:"at"`
}

// WireViews is the value of AnnotationNodeWire, in address order.
type WireViews []WireView

// ParseWireViews decodes an AnnotationNodeWire value; empty means none.
func ParseWireViews(s string) (WireViews, error) {
	return parseNodeAnnotation[WireViews](AnnotationNodeWire, s)
}

// String encodes the annotation value.
func (w WireViews) String() string { return nodeAnnotation(w) }
