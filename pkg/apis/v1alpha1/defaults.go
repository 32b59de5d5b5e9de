package v1alpha1

import (
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/vipctl/vipctl/pkg/openshiftrelease"
	"github.com/vipctl/vipctl/pkg/version"
)

// Defaults. They are part of the contract: changing one changes what every
// existing cluster file renders.
const (
	DefaultAPIPort                  = 6443
	DefaultLoadBalancerPort         = 9445
	DefaultInternalLoadBalancerPort = 22625 // the machine config server binds 22623 and 22624 on every address
	DefaultHealthPort               = 9444
	DefaultRouterNamespace          = "openshift-ingress"
	DefaultRouterHealthPort         = 1936
	DefaultIngressController        = "default"
	RouterDeploymentLabel           = "ingresscontroller.operator.openshift.io/deployment-ingresscontroller"
	DefaultPoolMaxHolders           = 8
	DefaultPoolInstances            = 2
	DefaultInterface                = "br-ex"
	ModeUnicast                     = "unicast"
	ModeMulticast                   = "multicast"
	ProfileDefault                  = "default"
	ProfileFast                     = "fast"
	defaultProfileAdvert            = "1s"
	fastProfileAdvert               = "100ms"
	defaultProfileVRRPVersion       = 2
	fastProfileVRRPVersion          = 3
	minVRRPv3Advert                 = 10 * time.Millisecond
	maxVRRPv3Advert                 = 40950 * time.Millisecond
	maxVRRPv2AdvertSeconds          = 255
	vrrpv3AdvertGranularity         = 10 * time.Millisecond
	maxPoolInstancesPerFamily       = 16
	maxInterfaceNameLength          = 15
	maxVirtualRouterID              = 255
	defaultIngressDomainPrefix      = "apps."
	defaultAutoAssign               = true
	PoolModeVRRP                    = "vrrp"
	PoolModeBGP                     = "bgp"
	// ModeFull and ModePoolsOnly are spec.mode's values: everything, or
	// the Service pools beside OpenShift's own keepalived.
	ModeFull      = "full"
	ModePoolsOnly = "poolsOnly"
	// AnnounceKeepalived and AnnounceSidecar are a vrrp pool's announce
	// values: who adds its Service addresses.
	AnnounceKeepalived = "keepalived"
	AnnounceSidecar    = "sidecar"
	// DefaultBGPHoldTime bounds how long a router keeps the routes of a
	// node that died silently. FRR's datacenter profile uses the same
	// 9s/3s; BGP's own 180s/60s would leave a dead node's routes for
	// minutes.
	DefaultBGPHoldTime = "9s"
	minBGPHoldTime     = 3 * time.Second
	maxBGPTimer        = 65535 * time.Second
)

// ClusterDomain is <name>.<baseDomain>, under which OpenShift names api,
// api-int and the default IngressController's apps domain.
func (c *ClusterVIPs) ClusterDomain() string { return c.Metadata.Name + "." + c.Spec.BaseDomain }

// SetDefaults fills every optional field. It is idempotent and runs before
// validation, so validation sees exactly what will be rendered.
func SetDefaults(c *ClusterVIPs) {
	s := &c.Spec
	// Mode stays empty (full), as announce does: a default written into
	// the ConfigMap would be an unknown field to older sidecars. In
	// poolsOnly mode there is no API to give ports to: spec.api stays
	// empty, so that validation can tell a file that sets it.
	if !c.PoolsOnly() {
		setAPIDefaults(&s.API)
	}
	for i := range s.Ingress {
		in := &s.Ingress[i]
		if in.RouterNamespace == "" {
			in.RouterNamespace = DefaultRouterNamespace
		}
		if len(in.RouterSelector) == 0 && in.Name != "" {
			in.RouterSelector = map[string]string{RouterDeploymentLabel: in.Name}
		}
		if in.HealthPort == 0 {
			in.HealthPort = DefaultRouterHealthPort
		}
		// Only from a valid name: a domain built from a bad one would add a
		// second, misleading error to the one about the name.
		if in.Domain == "" && in.Name == DefaultIngressController && len(validation.IsDNS1123Label(c.Metadata.Name)) == 0 && s.BaseDomain != "" {
			in.Domain = defaultIngressDomainPrefix + c.ClusterDomain()
		}
	}
	for i := range s.ServicePools {
		p := &s.ServicePools[i]
		if p.AutoAssign == nil {
			v := defaultAutoAssign
			p.AutoAssign = &v
		}
		if p.Instances == 0 {
			p.Instances = DefaultPoolInstances
		}
		if p.MaxHolders == 0 {
			p.MaxHolders = DefaultPoolMaxHolders
		}
		if p.Mode == "" {
			p.Mode = PoolModeVRRP
		}
		// Announce stays empty (keepalived): a default written into the
		// vipctl-config ConfigMap would be an unknown field to sidecars of
		// an older vipctl during a rolling update.
	}
	if s.BGP != nil {
		for i := range s.BGP.Peers {
			peer := &s.BGP.Peers[i]
			if peer.HoldTime == "" {
				peer.HoldTime = DefaultBGPHoldTime
			}
			if hold, err := time.ParseDuration(peer.HoldTime); peer.KeepaliveTime == "" && err == nil {
				peer.KeepaliveTime = (hold / 3).Truncate(time.Second).String()
			}
		}
	}
	v := &s.VRRP
	if v.Mode == "" {
		v.Mode = ModeUnicast
	}
	if v.Profile == "" {
		v.Profile = ProfileDefault
	}
	if v.Version == 0 {
		v.Version = defaultProfileVRRPVersion
		if v.Profile == ProfileFast {
			v.Version = fastProfileVRRPVersion
		}
	}
	if v.AdvertInterval == "" {
		v.AdvertInterval = defaultProfileAdvert
		if v.Profile == ProfileFast {
			v.AdvertInterval = fastProfileAdvert
		}
	}
	if v.Interface == "" {
		v.Interface = DefaultInterface
	}
	// One image (make image, docs/image.md) carries keepalived, haproxy and
	// vipctl, tagged with this binary's version: the pods run the sidecar
	// this render was made for, never whatever :latest is that day.
	image := version.Image()
	if s.Images.Keepalived == "" {
		s.Images.Keepalived = image
	}
	if s.Images.Haproxy == "" {
		s.Images.Haproxy = image
	}
	if s.Images.Vipctl == "" {
		s.Images.Vipctl = image
	}
	// Unlike the other defaults this one may move with the oldest release
	// still supported: a file that names none asks for output that every
	// supported release accepts, whichever those are at the time.
	if s.OpenShiftRelease == "" {
		s.OpenShiftRelease = openshiftrelease.Default().String()
	}
}

func setAPIDefaults(a *APISpec) {
	if a.Port == 0 {
		a.Port = DefaultAPIPort
	}
	if a.LoadBalancerPort == 0 {
		a.LoadBalancerPort = DefaultLoadBalancerPort
	}
	if a.InternalPort != 0 && a.InternalLoadBalancerPort == 0 {
		a.InternalLoadBalancerPort = DefaultInternalLoadBalancerPort
	}
	if a.HealthPort == 0 {
		a.HealthPort = DefaultHealthPort
	}
}

// PoolsOnly tells whether vipctl carries only the Service pools, beside
// OpenShift's own keepalived for the API and ingress VIPs (spec.mode
// poolsOnly): no API or ingress instance, no haproxy, no API redirect.
func (c *ClusterVIPs) PoolsOnly() bool { return c.Spec.Mode == ModePoolsOnly }

// Advert returns the advertisement interval. Call it only on a validated
// config; an unparsable interval reads as zero.
func (v VRRPSpec) Advert() time.Duration {
	d, err := time.ParseDuration(v.AdvertInterval)
	if err != nil {
		return 0
	}
	return d
}

// IsBGP tells whether the pool's addresses are announced by BGP rather
// than held by VRRP.
func (p ServicePool) IsBGP() bool { return p.Mode == PoolModeBGP }

// SidecarAnnounced tells whether the vipctl sidecar, not keepalived, adds
// the pool's Service addresses while its instances' anchors are held.
func (p ServicePool) SidecarAnnounced() bool { return !p.IsBGP() && p.Announce == AnnounceSidecar }

// Timers returns the peer's hold and keepalive times in seconds. Call it
// only on a validated config.
func (p BGPPeer) Timers() (hold, keepalive int) {
	h, _ := time.ParseDuration(p.HoldTime)
	k, _ := time.ParseDuration(p.KeepaliveTime)
	return int(h / time.Second), int(k / time.Second)
}

// IsAutoAssign reads AutoAssign with its default.
func (p ServicePool) IsAutoAssign() bool {
	return p.AutoAssign == nil || *p.AutoAssign
}
