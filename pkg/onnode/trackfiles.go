package onnode

import (
	"fmt"
	"strings"
)

// The track files the sidecar writes and keepalived.conf names: the
// sidecar says through them what keepalived cannot see itself (a drain,
// a router pod, a Local Service's endpoints, an unheard VIP), and
// keepalived adds their numbers to the node's priority.

// DrainFile is the track file the sidecar writes "1" to before a planned
// stop: every instance's priority drops to 1, below every peer's (2 at
// least), a peer takes over while this node still answers, and only then
// does keepalived stop (make-before-break).
const DrainFile = RunDir + "/drain"

// IngressStatusFile is where the sidecar says whether a ready router pod
// of that IngressController runs on this node ("0" yes, "1" no). It is what
// keeps a shard's VIP off nodes that only run another shard's router.
func IngressStatusFile(controller string) string {
	return fmt.Sprintf("%s/ingress-%s.status", RunDir, controller)
}

// LocalServiceStatusFile is where the sidecar says what this node runs of
// the Local Service: one of LocalReady, LocalDraining or LocalNone,
// which keepalived adds to the node's priority in the Service's instance
// (track_file weight 1). Earlier builds wrote service-*.status, 0 or 1
// under weight 0; the new name keeps a sidecar and a keepalived.conf of
// different builds, side by side during an upgrade, from reading each
// other's numbers.
func LocalServiceStatusFile(name string) string {
	return fmt.Sprintf("%s/service-%s.track", RunDir, strings.ReplaceAll(name, "/", "_"))
}

// LegacyLocalStatusGlob matches the status files of Local Services that
// earlier versions wrote, which nothing reads once this version's
// keepalived.conf is in place.
const LegacyLocalStatusGlob = RunDir + "/service-*.status"

// What a Local Service's status file holds. keepalived adds the number
// to the member's priority, keeps the result within 1..254, and puts
// the instance in FAULT below -253.
const (
	// LocalReady: a ready endpoint runs here; the member's own priority.
	LocalReady = 0
	// LocalDraining: only endpoints that are terminating but still serve
	// (a rollout's old pod in its preStop). Priority 1: the node keeps
	// the VIP until a member with a ready endpoint preempts it, however
	// late that member's sidecar loads the instance, and never takes it
	// from one.
	LocalDraining = -253
	// LocalNone: no endpoint that serves; FAULT, so never the holder
	// (a holder leaves with a priority 0 advert).
	LocalNone = -254
)

// UnheardFile is the track file the sidecar writes "1" to when the other
// members of a VRRP instance this node holds hear nobody answer for its
// VIPs, even after it announced them again (docs/runtimecfg.md, "Healing"):
// the instance's priority drops to 1, as a drain's does, and a member
// that is heard takes over. Absent is 0 (keepalived 2.2.7, measured).
func UnheardFile(instance string) string {
	return fmt.Sprintf("%s/unheard-%s", RunDir, instance)
}

// UnheardGlob matches every instance's UnheardFile.
const UnheardGlob = RunDir + "/unheard-*"
