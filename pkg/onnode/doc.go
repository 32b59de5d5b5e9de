// Package onnode is the node's contract: where vipctl's files, sockets and
// PID files lie on a node (paths.go), the track files the sidecar writes
// and keepalived.conf names (trackfiles.go), the timing of the
// announcements keepalived and the sidecar send (garp.go), how a VIP is
// marked as no address of the node's own (vip.go), and the desired state
// the plan hands the data plane (desired.go: Handover, InternalGuard,
// Announced). pkg/render computes what goes in them; the data plane, the
// daemons' packages, the static pods and the MachineConfigs meet at them
// without importing the plan. It holds no logic but naming.
package onnode
