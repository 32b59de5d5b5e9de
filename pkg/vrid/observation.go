package vrid

import (
	"errors"
	"net/netip"
	"time"
)

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

// Capture is what one Listen heard on an interface.
type Capture struct {
	Interface string
	// For is how long it listened.
	For time.Duration
	// Adverts counts every VRRP advertisement received.
	Adverts int
	// Routers are the routers heard, once per (ID, family, source).
	Routers []Observation
}

// ErrNoInterface is Listen's error for an interface this host lacks.
var ErrNoInterface = errors.New("this host has no interface")
