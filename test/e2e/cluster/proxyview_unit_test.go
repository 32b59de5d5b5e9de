package cluster

import (
	"reflect"
	"testing"
)

// TestProxyEndpoints reads kube-proxy's nftables chains as nft lists
// them (kube-proxy 1.36, pkg/proxy/nftables): endpoint chains (session
// affinity; IPv6 addresses spelled with dots in their names) and the
// DNAT map every other Service gets (lines as the lab's kube-proxy wrote
// them).
func TestProxyEndpoints(t *testing.T) {
	listing := `table ip kube-proxy {
	chain service-ULMVA6XW-lab/vrrp-cluster/tcp/ {
		ip daddr 172.30.0.10 tcp dport 80 ip saddr != 203.0.113.0/25 jump mark-for-masquerade
		numgen random mod 2 vmap { 0 : goto endpoint-5OJB2KTY-lab/vrrp-cluster/tcp/__203.0.113.5/8080, 1 : goto endpoint-2JNKTDBI-lab/vrrp-cluster/tcp/__203.0.113.40/8080 }
	}
	chain endpoint-5OJB2KTY-lab/vrrp-cluster/tcp/__203.0.113.5/8080 {
		ip saddr 203.0.113.5 jump mark-for-masquerade
		meta l4proto tcp dnat to 203.0.113.5:8080
	}
	chain service-AAAAAAAA-lab/bgp-local/tcp/ {
		goto endpoint-BBBBBBBB-lab/bgp-local/tcp/__203.0.113.66/8080
	}
	chain service-F4C5P3LM-lab/sidecar-cluster/tcp/http {
		meta l4proto tcp dnat ip to numgen random mod 2 map { 0 : 203.0.113.2 . 8080, 1 : 203.0.113.34 . 8080 }
	}
	chain services {
		ip daddr . meta l4proto . th dport vmap @service-ips
	}
}
`
	got := proxyEndpoints(listing, false)
	want := map[string][]string{
		"lab/vrrp-cluster":    {"203.0.113.5", "203.0.113.40"},
		"lab/bgp-local":       {"203.0.113.66"},
		"lab/sidecar-cluster": {"203.0.113.2", "203.0.113.34"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("IPv4: got %v, want %v", got, want)
	}
	listing6 := `	chain service-CCCCCCCC-lab/vrrp-cluster/tcp/ {
		numgen random mod 2 vmap { 0 : goto endpoint-DDDDDDDD-lab/vrrp-cluster/tcp/__2001.db8.200..5/8080,
		                           1 : goto endpoint-EEEEEEEE-lab/vrrp-cluster/tcp/__2001.db8.200.1..7/8080 }
	}
	chain service-F4C5P3LM-lab/bgp-cluster/tcp/http {
		meta l4proto tcp dnat ip6 to numgen random mod 2 map { 0 : 2001:db8:200:1::2 . 8080, 1 : 2001:db8:200::4 . 8080 }
	}
`
	got = proxyEndpoints(listing6, true)
	want = map[string][]string{
		"lab/vrrp-cluster": {"2001:db8:200::5", "2001:db8:200:1::7"},
		"lab/bgp-cluster":  {"2001:db8:200:1::2", "2001:db8:200::4"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("IPv6: got %v, want %v", got, want)
	}
}

// TestKubeProxySockets reads `ss -tnpiOHa` (iproute2 6.1) as a node
// shows it: kube-proxy's connection with its ends and liveness fields,
// its listener and other processes' sockets left out; and the answerer
// of a connection from `conntrack -L` (conntrack 1.4.7), here the node's
// haproxy the API redirect turned it to; and haproxy's connections to
// the apiservers, by apiserver, the quietest of each.
func TestKubeProxySockets(t *testing.T) {
	ss := `LISTEN 0      4096               *:10256            *:*    users:(("kube-proxy",pid=4412,fd=9)) cubic cwnd:10
ESTAB  0      0      198.51.100.13:35954 198.51.100.5:6443 users:(("kube-proxy",pid=4412,fd=7)) cubic wscale:7,7 rto:204 rtt:1.2/0.4 bytes_sent:9120 bytes_received:88012 lastsnd:24012 lastrcv:23990 lastack:23990 unacked:2 retrans:0/3 rcv_space:14600
ESTAB  0      0      198.51.100.13:40112 198.51.100.5:6443 users:(("kubelet",pid=3000,fd=12)) cubic lastsnd:10 lastrcv:10
`
	got := kubeProxySockets(ssSockets(ss))
	want := []proxySocket{{summary: "ESTAB 198.51.100.13:35954->198.51.100.5:6443 lastsnd:24012 lastrcv:23990 unacked:2 retrans:0/3", port: "35954"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("kubeProxySockets = %#v, want %#v", got, want)
	}
	ct := `tcp      6 431998 ESTABLISHED src=198.51.100.13 dst=198.51.100.5 sport=35954 dport=6443 src=127.0.0.1 dst=127.0.0.1 sport=9445 dport=35954 [ASSURED] mark=0 use=1
conntrack v1.4.7 (conntrack-tools): 1 flow entries have been shown.
`
	if got, want := conntrackAnswerer(ct), "answered from 127.0.0.1:9445"; got != want {
		t.Errorf("conntrackAnswerer = %q, want %q", got, want)
	}
	ss += `ESTAB  0      0      198.51.100.13:51000 198.51.100.12:6443 users:(("haproxy",pid=5000,fd=30)) cubic lastsnd:25000 lastrcv:24000 lastack:24000
ESTAB  0      0      198.51.100.13:51002 198.51.100.12:6443 users:(("haproxy",pid=5000,fd=31)) cubic lastsnd:300 lastrcv:31000 lastack:300
ESTAB  0      0      198.51.100.13:51004 198.51.100.11:6443 users:(("haproxy",pid=5000,fd=32)) cubic lastsnd:20 lastrcv:15 lastack:15
ESTAB  0      0      127.0.0.1:9445 198.51.100.13:35954 users:(("haproxy",pid=5000,fd=33)) cubic lastsnd:20 lastrcv:15
`
	if got, want := haproxyUpstreams(ssSockets(ss)), "198.51.100.11:6443 ×1 (quietest lastrcv:15), 198.51.100.12:6443 ×2 (quietest lastrcv:31000)"; got != want {
		t.Errorf("haproxyUpstreams = %q, want %q", got, want)
	}
	if got, want := conntrackAnswerer("conntrack v1.4.7 (conntrack-tools): 0 flow entries have been shown.\n"), "no conntrack entry"; got != want {
		t.Errorf("conntrackAnswerer of nothing = %q, want %q", got, want)
	}
}
