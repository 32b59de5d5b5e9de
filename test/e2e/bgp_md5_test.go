package e2e

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vipctl/vipctl/pkg/apis/v1alpha1"
	"github.com/vipctl/vipctl/pkg/frr"
	"github.com/vipctl/vipctl/pkg/onnode"
	"github.com/vipctl/vipctl/test/lab"
	"github.com/vipctl/vipctl/test/netlab"
)

// bgpMD5YAML peers every node with the router under a TCP MD5 password
// from the Secret vipctl-system/bgp-router.
var bgpMD5YAML = strings.Replace(bgpUpdateYAML, "        keepaliveTime: 1s\n", "        keepaliveTime: 1s\n        passwordSecret: bgp-router\n", 1)

// bgpMD5Password is the router's side of the sessions' password.
const bgpMD5Password = "Lab-md5.s3cret"

// TestBGPMD5: a peer's passwordSecret, against FRR as the router with
// the same password on its listen range (testBGPMD5).
func TestBGPMD5(t *testing.T) {
	testBGPMD5(t, func(kc *lab.KubeCluster) {
		router := append(slices.Clone(upstreamFRR[:len(upstreamFRR)-1]), " neighbor nodes password "+bgpMD5Password, "exit")
		newBGPLab(t, kc.Cluster, map[string][]string{netlab.DefaultSegment: {"198.51.100.1/24"}}, router)
	})
}

// TestBGPMD5Bird: the same against BIRD 2 (Debian's bird2) as the router,
// one protocol per node with the password: the nodes' FRR and another
// implementation agree on TCP MD5.
func TestBGPMD5Bird(t *testing.T) {
	var bird *lab.BIRD
	testBGPMD5(t, func(kc *lab.KubeCluster) {
		r := kc.AddRouter("upstream", map[string][]string{netlab.DefaultSegment: {"198.51.100.1/24"}})
		conf := []string{
			"log stderr all;",
			"router id 198.51.100.1;",
			"protocol device {}",
			"template bgp nodes {",
			"  local 198.51.100.1 as 64512;",
			"  hold time 3; keepalive time 1; connect retry time 1;",
			`  password "` + bgpMD5Password + `";`,
			"  ipv4 { import all; export none; };",
			"}",
		}
		for _, n := range kc.Nodes {
			conf = append(conf, "protocol bgp "+birdName(n.Name)+" from nodes { neighbor "+n.Addr+" as 64513; }")
		}
		bird = lab.StartBIRD(t, r, conf...)
		for _, n := range kc.Nodes {
			lab.StartFRR(t, n.Host, n.Target.Root)
		}
	})
	for _, n := range []string{"master-0", "worker-0"} {
		if !bird.Established(birdName(n)) {
			t.Errorf("BIRD's protocol for %s is not Established at the end", n)
		}
	}
}

// birdName is a BIRD protocol name for a node (letters, digits, _).
func birdName(node string) string { return strings.ReplaceAll(node, "-", "_") }

// testBGPMD5: the real sidecars (the nodes' own credentials, allowed get
// on that Secret alone) read the Secret, render frr.conf with it (mode
// 0600) and the sessions to the router startRouter starts come up; the
// password is in no ConfigMap and no sidecar log. A wrong password in
// the Secret reaches frr.conf and the router refuses the sessions (TCP
// MD5 mismatch: they stay down); the right one again brings them back.
func testBGPMD5(t *testing.T, startRouter func(kc *lab.KubeCluster)) {
	lab.RequireFRR(t)
	gw := []string{"198.51.100.1"}
	kc := lab.StartKube(t, bgpMD5YAML, []lab.NodeSpec{
		{Name: "master-0", Addr: "198.51.100.11/24", ControlPlane: true, Gateways: gw},
		{Name: "worker-0", Addr: "198.51.100.21/24", Labels: map[string]string{"pool": "web"}, Gateways: gw},
	})
	startRouter(kc)
	kc.ApplyManifests(t)
	kc.GrantNodeReaders(t)
	ctx := context.Background()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "bgp-router", Namespace: onnode.Namespace},
		Type: corev1.SecretTypeBasicAuth, Data: map[string][]byte{v1alpha1.BGPPasswordKey: []byte(bgpMD5Password)}}
	if _, err := kc.Admin.CoreV1().Secrets(onnode.Namespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, n := range kc.Nodes {
		kc.AddNode(t, n.Name)
		kc.StartSidecar(t, n.Name)
	}
	established := func(node string) bool {
		peers, ok, err := frr.ReadSessions(ctx, kc.ByName[node].Target)
		return err == nil && ok && len(peers) == 1 && peers[0].State == v1alpha1.BGPStateEstablished
	}
	for _, n := range kc.Nodes {
		lab.WaitFor(t, 30*time.Second, n.Name+"'s session Established with the password", func() bool { return established(n.Name) })
		path := n.Target.Path(onnode.FRRConfPath)
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: frr.conf has mode %v, want 0600 (it holds a password)", n.Name, fi.Mode().Perm())
		}
	}
	cm, err := kc.Admin.CoreV1().ConfigMaps(onnode.Namespace).Get(ctx, v1alpha1.ConfigMapName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(cm.Data[v1alpha1.ConfigMapKey], bgpMD5Password) {
		t.Error("the password is in the ConfigMap")
	}

	// A wrong password: frr.conf takes it, the router refuses.
	setPassword := func(pw string) {
		t.Helper()
		s, err := kc.Admin.CoreV1().Secrets(onnode.Namespace).Get(ctx, "bgp-router", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.Data[v1alpha1.BGPPasswordKey] = []byte(pw)
		if _, err := kc.Admin.CoreV1().Secrets(onnode.Namespace).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setPassword("not-the-routers")
	for _, n := range kc.Nodes {
		lab.WaitFor(t, 30*time.Second, n.Name+"'s frr.conf with the wrong password", func() bool {
			c, err := os.ReadFile(n.Target.Path(onnode.FRRConfPath))
			return err == nil && strings.Contains(string(c), " password not-the-routers\n")
		})
	}
	for _, n := range kc.Nodes {
		lab.WaitFor(t, 30*time.Second, n.Name+"'s session down with the wrong password", func() bool { return !established(n.Name) })
	}
	// Hold it a while: a session that came back would be a router that
	// took the wrong password.
	deadline := time.Now().Add(3 * bgpPasswordCheck)
	for time.Now().Before(deadline) {
		for _, n := range kc.Nodes {
			if established(n.Name) {
				t.Fatalf("%s's session Established with a password the router does not have", n.Name)
			}
		}
		time.Sleep(250 * time.Millisecond)
	}

	// The right one again: the sessions come back.
	setPassword(bgpMD5Password)
	for _, n := range kc.Nodes {
		lab.WaitFor(t, 60*time.Second, n.Name+"'s session Established again", func() bool { return established(n.Name) })
	}
	for _, n := range kc.Nodes {
		if log := kc.Sidecars[n.Name].Log.String(); strings.Contains(log, bgpMD5Password) || strings.Contains(log, "not-the-routers") {
			t.Errorf("%s's sidecar logged a password", n.Name)
		}
	}
}

// bgpPasswordCheck is how long the test watches a refused session stay
// down: three hold times of the lab's peers.
const bgpPasswordCheck = 3 * time.Second
