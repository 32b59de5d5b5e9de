package clusterlab

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"net"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/vipctl/vipctl/test/testapiserver"
)

// Where the lab's credentials live on a node. The kubelet's are where an
// OpenShift node keeps them (kubeletlab.NodeKubeconfig names a client
// certificate file under /var/lib/kubelet/pki, which the sidecar mounts);
// the rest is the control plane's own, in the directory its static pods
// mount.
const (
	pkiDir              = "/etc/kubernetes/pki"
	caFile              = pkiDir + "/ca.crt"
	apiserverCertFile   = pkiDir + "/apiserver.crt"
	apiserverKeyFile    = pkiDir + "/apiserver.key"
	saKeyFile           = pkiDir + "/sa.key"
	saPubFile           = pkiDir + "/sa.pub"
	kubeletClientFile   = "/var/lib/kubelet/pki/kubelet-client-current.pem"
	kcmKubeconfig       = "/etc/kubernetes/kube-controller-manager.kubeconfig"
	schedKubeconfig     = "/etc/kubernetes/kube-scheduler.kubeconfig"
	kubeProxyKubeconfig = "/etc/kubernetes/kube-proxy.kubeconfig"
)

// pki is the cluster's one CA and what it signed for every node: the
// apiservers' serving certificate (all three share it), the
// ServiceAccount token key, and client certificates per identity.
type pki struct {
	ca             *testapiserver.CA
	serverCert     []byte
	serverKey      []byte
	saKey, saPub   []byte
	adminCert      []byte
	adminKey       []byte
	kubeProxy      []byte
	kcm, scheduler []byte
}

// apiURL is where every client outside the control plane's own pods
// reaches the API: the API VIP on the apiservers' port, which is what
// api-int resolves to on OpenShift (the VIP's holder redirects it to
// haproxy).
func apiURL() string {
	return "https://" + net.JoinHostPort(APIVIP4, "6443")
}

// localAPIURL is the node's own kube-apiserver, which the controller
// manager and the scheduler use, as on OpenShift.
const localAPIURL = "https://127.0.0.1:6443"

func newPKI(t testing.TB) *pki {
	t.Helper()
	p := &pki{ca: testapiserver.NewCA(t, "vipctl-lab-ca")}
	ips := []net.IP{net.ParseIP(APIVIP4), net.ParseIP(APIVIP6), net.ParseIP(kubernetesIP4), net.ParseIP(kubernetesIP6),
		net.ParseIP("127.0.0.1"), net.ParseIP("::1")}
	for _, n := range Nodes {
		if n.Role == RoleMaster {
			ips = append(ips, net.ParseIP(n.IP4), net.ParseIP(n.IP6))
		}
	}
	p.serverCert, p.serverKey = p.ca.ServerCert(t, "kube-apiserver", ips, []string{
		"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local",
		"api." + clusterName + "." + baseDomain, "api-int." + clusterName + "." + baseDomain,
	})
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	p.saKey = pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
	p.saPub = pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})
	p.adminCert, p.adminKey = p.ca.IssueClient(t, "lab-admin", []string{"system:masters"})
	// The users the default RBAC binds: system:node-proxier to
	// system:kube-proxy, the controller manager's and scheduler's roles
	// to theirs.
	p.kubeProxy = p.kubeconfig(t, apiURL(), "system:kube-proxy")
	p.kcm = p.kubeconfig(t, localAPIURL, "system:kube-controller-manager")
	p.scheduler = p.kubeconfig(t, localAPIURL, "system:kube-scheduler")
	return p
}

// kubeconfig is a kubeconfig for user at server with the certificate
// embedded.
func (p *pki) kubeconfig(t testing.TB, server, user string, groups ...string) []byte {
	t.Helper()
	cert, key := p.ca.IssueClient(t, user, groups)
	return p.write(t, server, &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key})
}

func (p *pki) write(t testing.TB, server string, auth *clientcmdapi.AuthInfo) []byte {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["lab"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: p.ca.CertPEM()}
	kc.AuthInfos["lab"] = auth
	kc.Contexts["lab"] = &clientcmdapi.Context{Cluster: "lab", AuthInfo: "lab"}
	kc.CurrentContext = "lab"
	data, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// kubeletKubeconfig is every node's kubelet kubeconfig: the API VIP, and
// the client certificate in kubeletClientFile (system:node:NAME in
// system:nodes, kubeletClient), which the Node authorizer and
// NodeRestriction confine to the node's own objects.
func (p *pki) kubeletKubeconfig(t testing.TB) []byte {
	t.Helper()
	return p.write(t, apiURL(), &clientcmdapi.AuthInfo{ClientCertificate: kubeletClientFile, ClientKey: kubeletClientFile})
}

// kubeletClient is the node's client certificate and key in one file, as
// the kubelet keeps them.
func (p *pki) kubeletClient(t testing.TB, node string) []byte {
	t.Helper()
	cert, key := p.ca.IssueClient(t, "system:node:"+node, []string{"system:nodes"})
	return append(cert, key...)
}

// clusterName and baseDomain are the cluster file's.
const (
	clusterName = "lab"
	baseDomain  = "example.test"
)
