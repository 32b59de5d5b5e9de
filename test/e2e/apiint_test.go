package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vipctl/vipctl/test/lab"
	"github.com/vipctl/vipctl/test/lab/probe"
	"github.com/vipctl/vipctl/test/netlab"
)

// The api-int lab's addresses: api-int's own VIPs beside the API's, and
// an outsider on another subnet, routed to the nodes' segment.
const (
	apiIntVIP4   = "198.51.100.4"
	apiIntVIP6   = "2001:db8:100::4"
	apiVIP6      = "2001:db8:100::5"
	outsider4    = "203.0.113.50"
	outsider6    = "2001:db8:113::50"
	mcsPort      = "22623"
	apiPort      = "6443"
	apiIntConfig = "/config/worker"
)

// apiIntClusterYAML is the lab's dual-stack cluster with api-int's own
// VIPs and the machine config server behind them.
func apiIntClusterYAML() string {
	return strings.Replace(clusterYAML("fast", "unicast", ""), "api: {vips: ["+apiVIP+"]}",
		fmt.Sprintf(`api: {vips: [%s, "%s"], internalVIPs: [%s, "%s"], internalPort: 22623}`, apiVIP, apiVIP6, apiIntVIP4, apiIntVIP6), 1)
}

// TestAPIIntOnlyForNodes: api-int's own VIPs (IPv4 and IPv6) in a lab of
// three control-plane nodes running the real keepalived and haproxy,
// brought in line by the sidecar's Reconcile (which writes the nftables
// guard), each with a machine config server stand-in on 22623. A client
// on the node network gets an Ignition from 22623 through the api-int VIP
// of either family, and the API through it on 6443. A host on another
// subnet (203.0.113.0/24 and 2001:db8:113::/64, routed in) reaches the
// API VIP's 6443 (the route works, the API stays public) but is refused,
// with a TCP reset, on 22623 of the API VIP, on every port of the api-int
// VIPs and on 22623 of a node's own address. Then the api-int VIPs'
// holder loses its link: the VIPs move, and the same holds on the new
// holder, in both families.
func TestAPIIntOnlyForNodes(t *testing.T) {
	lc := lab.New(t, apiIntClusterYAML())
	lc.AddSegment("out")
	lc.AddRouter("edge", map[string][]string{
		netlab.DefaultSegment: {"198.51.100.1/24", "2001:db8:100::1/64"},
		"out":                 {"203.0.113.1/24", "2001:db8:113::1/64"},
	})
	outsider := lc.AddHost("outsider", netlab.HostOpts{Iface: "eth0", Segment: "out",
		Addrs: []string{outsider4 + "/24", outsider6 + "/64"}, Gateways: []string{"203.0.113.1", "2001:db8:113::1"}})
	specs := masters(3)
	for i := range specs {
		specs[i].Addr6 = fmt.Sprintf("2001:db8:100::%d/64", 11+i)
		specs[i].Gateways = []string{"198.51.100.1", "2001:db8:100::1"}
	}
	lc.StartNodes(specs)
	holders := lc.SettledAll(apiVIP, apiVIP6, apiIntVIP4, apiIntVIP6)
	holder := holders[apiIntVIP4]
	if holders[apiIntVIP6] != holder {
		t.Fatalf("api-int's families sit on %s and %s; both families of a key share priorities", holder, holders[apiIntVIP6])
	}

	check := func(stage string, nodeAddr string) {
		t.Helper()
		for _, vip := range []string{apiIntVIP4, apiIntVIP6} {
			ign, err := fetchIgnition(lc.Client, vip)
			if err != nil {
				t.Errorf("%s: node-network client, api-int VIP %s:%s: %v", stage, vip, mcsPort, err)
			} else {
				t.Logf("%s: node-network client, api-int VIP %s:%s: Ignition %s from %s", stage, vip, mcsPort, ign.Ignition.Version, ign.Storage.Files[0].Contents.Source)
			}
			if _, err := fetch(lc.Client, vip, apiPort, "/"); err != nil {
				t.Errorf("%s: node-network client, api-int VIP %s:%s: %v", stage, vip, apiPort, err)
			}
		}
		if _, err := fetchIgnition(lc.Client, nodeAddr); err != nil {
			t.Errorf("%s: node-network client, node address %s:%s: %v", stage, nodeAddr, mcsPort, err)
		}
		// The outsider's route works: the API stays open to it.
		for _, vip := range []string{apiVIP, apiVIP6} {
			if _, err := fetch(outsider, vip, apiPort, "/"); err != nil {
				t.Errorf("%s: outsider, API VIP %s:%s: %v; the API must stay open to every client", stage, vip, apiPort, err)
			}
		}
		for _, target := range []struct{ addr, port, what string }{
			{apiVIP, mcsPort, "API VIP"}, {apiVIP6, mcsPort, "API VIP"},
			{apiIntVIP4, mcsPort, "api-int VIP"}, {apiIntVIP6, mcsPort, "api-int VIP"},
			{apiIntVIP4, apiPort, "api-int VIP"}, {apiIntVIP6, apiPort, "api-int VIP"},
			{nodeAddr, mcsPort, "node address"},
		} {
			body, err := fetch(outsider, target.addr, target.port, apiIntConfig)
			if !errors.Is(err, syscall.ECONNREFUSED) {
				t.Errorf("%s: outsider, %s %s:%s: got %q, %v; want the connection refused", stage, target.what, target.addr, target.port, body, err)
			}
		}
	}
	other := lc.ByName["master-0"]
	if other.Name == holder {
		other = lc.ByName["master-1"]
	}
	check("settled on "+holder, other.Addr)

	lc.ByName[holder].Host.LinkDown()
	next := lc.WaitNewHolder(apiIntVIP4, holder, 10*time.Second)
	if next6 := lc.WaitNewHolder(apiIntVIP6, holder, 10*time.Second); next6 != next {
		t.Fatalf("after %s went away api-int's families sit on %s and %s", holder, next, next6)
	}
	for _, vip := range []string{apiVIP, apiVIP6} {
		if holders[vip] == holder {
			lc.WaitNewHolder(vip, holder, 10*time.Second)
		}
	}
	// The lost holder still has the VIPs on its cut-off interface
	// (lab-notes pitfall 2); the clients reach the new holder.
	lab.WaitFor(t, 10*time.Second, "an Ignition through the api-int VIP from "+next, func() bool {
		_, err4 := fetchIgnition(lc.Client, apiIntVIP4)
		_, err6 := fetchIgnition(lc.Client, apiIntVIP6)
		return err4 == nil && err6 == nil
	})
	survivor := other
	if survivor.Name == next {
		for _, n := range lc.Nodes {
			if n.Name != holder && n.Name != next {
				survivor = n
			}
		}
	}
	check(fmt.Sprintf("after %s lost its link, held by %s", holder, next), survivor.Addr)
}

// fetch asks https://addr:port/path from inside h with a new connection,
// as a node's Ignition fetch would, and returns the body of a 200.
func fetch(h *netlab.Host, addr, port, path string) (string, error) {
	tr := &http.Transport{
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // stand-in servers with throwaway certificates
		DisableKeepAlives: true,
		DialContext:       h.DialContext,
	}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return probe.Get(ctx, &http.Client{Transport: tr}, "https://"+net.JoinHostPort(addr, port)+path)
}

// fetchIgnition asks addr's 22623 for a worker's Ignition and checks it
// is one.
func fetchIgnition(h *netlab.Host, addr string) (*lab.IgnitionStandIn, error) {
	body, err := fetch(h, addr, mcsPort, apiIntConfig)
	if err != nil {
		return nil, err
	}
	var ign lab.IgnitionStandIn
	if err := json.Unmarshal([]byte(body), &ign); err != nil {
		return nil, fmt.Errorf("not an Ignition: %w: %q", err, body)
	}
	if ign.Ignition.Version != lab.IgnitionVersion || len(ign.Storage.Files) != 1 || !strings.HasPrefix(ign.Storage.Files[0].Contents.Source, "data:,worker@") {
		return nil, fmt.Errorf("not the stand-in's Ignition: %q", body)
	}
	return &ign, nil
}
