// Package vrid computes VRRP virtual router IDs the way OpenShift does, and
// IDs for every further VRRP instance of a cluster, and checks them for
// clashes with other clusters and with what is live on the LAN. It is
// public so that other tools compute the same IDs.
//
// # Contract
//
// The API and default-ingress IDs are OpenShift's (see OpenShiftIDs). Every
// other instance key (ingress/<name>, pool/<name>/<n>) takes, in
// declaration order, the first free ID of its own probe sequence
//
//	c_i = 1 + (uint32 big-endian of SHA-256(cluster + "/" + key + "/" + decimal(i))[0:4]) mod 255
//
// for i = 0, 1, 2, ...,
//
// where free means not pinned by an override, not taken by an earlier key
// and not avoided. Should 1020 probes find nothing free, the key takes the
// first free ID counting up from c_0 (wrapping 255 to 1). Appending a key therefore never changes an earlier key's
// ID; reordering or removing keys can. Pin IDs with overrides to be immune
// to any edit.
package vrid

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Fletcher8 is OpenShift's checksum (baremetal-runtimecfg), including its
// uint8 arithmetic: both sums are taken modulo 15 and may wrap at 256 on
// non-ASCII input, exactly as there.
func Fletcher8(s string) uint8 {
	var a, b uint8
	for i := 0; i < len(s); i++ {
		a = (a + s[i]) % 15
		b = (b + a) % 15
	}
	return b<<4 | a
}

// OpenShiftIDs returns the API and ingress IDs OpenShift derives from a
// cluster name: Fletcher8 of "<name>-api" and "<name>-ingress", plus one;
// an ingress ID equal to the API ID is bumped by one. (That cannot happen:
// no checksum state makes the two suffixes end equal, as a test proves for
// every state. The bump stays so this reads as OpenShift's rule.)
func OpenShiftIDs(cluster string) (api, ingress uint8) {
	api = Fletcher8(cluster+"-api") + 1
	ingress = Fletcher8(cluster+"-ingress") + 1
	if ingress == api {
		ingress++
	}
	return api, ingress
}

// ValidateClusterName accepts what OpenShift accepts as a cluster name: a
// DNS-1123 label.
func ValidateClusterName(name string) error {
	if msgs := validation.IsDNS1123Label(name); len(msgs) > 0 {
		return fmt.Errorf("invalid cluster name %q: %s", name, msgs[0])
	}
	return nil
}
