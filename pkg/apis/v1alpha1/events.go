package v1alpha1

// The source components of the Events vipctl records: the allocator, the
// sidecars (with their node as the source's host) and `vipctl update
// --force`. `vipctl diagnose` gathers the Events by these names, so they
// are defined once here.
const (
	EventSourceAllocator = "vipctl-allocator"
	EventSourceSidecar   = "vipctl-runtimecfg"
	EventSourceUpdate    = "vipctl-update"
)

// EventSources are every component above.
var EventSources = []string{EventSourceAllocator, EventSourceSidecar, EventSourceUpdate}
