package vrid

import "net/netip"

// Observation is one VRRP router seen advertising on the LAN.
type Observation struct {
	ID          uint8      `json:"id"`
	Version     int        `json:"version"`
	Family      string     `json:"family"`
	Source      netip.Addr `json:"source"`
	Destination netip.Addr `json:"destination"`
	Priority    uint8      `json:"priority"`
	// AdvertCentis is the advertisement interval in centiseconds.
	AdvertCentis int `json:"advertCentis"`
}
