// Package testapiserver runs a real control plane for tests: etcd and
// kube-apiserver built from source by hack/build-apiserver.sh, on loopback
// with free ports, Node and RBAC authorization with the NodeRestriction
// admission plugin (what a real cluster enforces), a client CA for node
// identities and a static admin token. Everything is stopped by PID and
// removed when the test ends.
package testapiserver

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	podsecurityv1 "k8s.io/pod-security-admission/admission/api/v1"
	"sigs.k8s.io/yaml"

	"github.com/vipctl/vipctl/test/fixture"
)

// Server is a running etcd + kube-apiserver pair.
type Server struct {
	// URL is the apiserver's https URL on loopback.
	URL string
	dir string
	ca  *CA
	// serverCA verifies the apiserver's self-signed serving certificate.
	serverCA   []byte
	adminToken string

	mu        sync.Mutex
	apiserver *exec.Cmd
	apiArgs   []string
	etcd      *exec.Cmd
}

// Binaries are looked up in the repository's bin/, where
// hack/build-apiserver.sh puts them.
func binDir() string { return fixture.Repo("bin") }

// Options change how the apiserver starts; the zero value is Start's.
type Options struct {
	// PodSecurity is the Pod Security level (privileged, baseline,
	// restricted) the PodSecurity admission plugin enforces, audits and
	// warns about in a namespace that names none itself. Empty: the
	// plugin's default, privileged. A cluster may set a stricter default
	// (OpenShift's label syncer sets namespace labels from the SCCs its
	// ServiceAccounts may use), so the namespace vipctl renders must
	// name its level.
	PodSecurity string
}

// Start launches etcd and kube-apiserver and waits until the apiserver is
// ready. It fails the test (never skips) when the binaries are missing:
// `make test` builds them first.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartWith(t, Options{})
}

// StartWith is Start with options.
func StartWith(t testing.TB, o Options) *Server {
	t.Helper()
	bin := binDir()
	for _, b := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			t.Fatalf("%s not built: run hack/build-apiserver.sh (make test does): %v", b, err)
		}
	}
	dir := t.TempDir()
	s := &Server{dir: dir, adminToken: randomToken(t)}
	t.Cleanup(s.stop)

	ports := freePorts(t, 3)
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	s.etcd = s.launch(t, "etcd", filepath.Join(bin, "etcd"),
		"--name=default", "--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		"--listen-peer-urls=http://127.0.0.1:"+strconv.Itoa(ports[1]),
		"--initial-advertise-peer-urls=http://127.0.0.1:"+strconv.Itoa(ports[1]),
		"--initial-cluster=default=http://127.0.0.1:"+strconv.Itoa(ports[1]),
		// Durability is worth nothing in a test that deletes the data dir.
		"--unsafe-no-fsync", "--log-level=warn")

	s.ca = NewCA(t, "vipctl-test-client-ca")
	caFile := writePEM(t, dir, "client-ca.crt", "CERTIFICATE", s.ca.certDER)
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	saDER, err := x509.MarshalECPrivateKey(saKey)
	if err != nil {
		t.Fatal(err)
	}
	saFile := writePEM(t, dir, "sa.key", "EC PRIVATE KEY", saDER)
	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte(s.adminToken+`,admin,admin,"system:masters"`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s.URL = "https://127.0.0.1:" + strconv.Itoa(ports[2])
	s.apiArgs = []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(ports[2]),
		"--cert-dir=" + filepath.Join(dir, "serving"),
		"--client-ca-file=" + caFile,
		"--token-auth-file=" + tokens,
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + saFile,
		"--service-account-signing-key-file=" + saFile,
		// Dual-stack, from documentation ranges, apart from the test node
		// addresses; nothing routes these, the apiserver only allocates them.
		"--service-cluster-ip-range=203.0.113.192/26,2001:db8:5e::/112",
		"--allow-privileged=true",
		"--endpoint-reconciler-type=none",
		"--v=1",
	}
	if o.PodSecurity != "" {
		s.apiArgs = append(s.apiArgs, "--admission-control-config-file="+podSecurityConfig(t, dir, o.PodSecurity))
	}
	s.apiserver = s.launch(t, "kube-apiserver", filepath.Join(bin, "kube-apiserver"), s.apiArgs...)
	s.waitReady(t)
	return s
}

// podSecurityConfig writes an admission configuration whose PodSecurity
// defaults are level, and returns its path.
func podSecurityConfig(t testing.TB, dir, level string) string {
	t.Helper()
	type plugin struct {
		Name          string                                 `json:"name"`
		Configuration podsecurityv1.PodSecurityConfiguration `json:"configuration"`
	}
	cfg := struct {
		metav1.TypeMeta
		Plugins []plugin `json:"plugins"`
	}{
		TypeMeta: metav1.TypeMeta{APIVersion: "apiserver.config.k8s.io/v1", Kind: "AdmissionConfiguration"},
		Plugins: []plugin{{Name: "PodSecurity", Configuration: podsecurityv1.PodSecurityConfiguration{
			TypeMeta: metav1.TypeMeta{APIVersion: podsecurityv1.SchemeGroupVersion.String(), Kind: "PodSecurityConfiguration"},
			Defaults: podsecurityv1.PodSecurityDefaults{Enforce: level, EnforceVersion: "latest", Audit: level, AuditVersion: "latest", Warn: level, WarnVersion: "latest"},
		}}},
	}
	data, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "admission.yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func (s *Server) launch(t testing.TB, name, path string, args ...string) *exec.Cmd {
	t.Helper()
	logPath := filepath.Join(s.dir, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Its own process group, so nothing it forks outlives the test.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	_ = logFile.Close()
	return cmd
}

func (s *Server) waitReady(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // only to learn when the freshly generated serving cert is up
	for time.Now().Before(deadline) {
		req, _ := http.NewRequest(http.MethodGet, s.URL+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+s.adminToken)
		resp, err := client.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				ca, err := os.ReadFile(filepath.Join(s.dir, "serving", "apiserver.crt"))
				if err != nil {
					t.Fatalf("reading serving certificate: %v", err)
				}
				s.serverCA = ca
				return
			}
		}
		if s.exited(s.apiserver) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("kube-apiserver not ready; log tail:\n%s", s.LogTail("kube-apiserver", 40))
}

func (s *Server) exited(cmd *exec.Cmd) bool {
	return cmd.ProcessState != nil || cmd.Process.Signal(syscall.Signal(0)) != nil
}

// LogTail returns the last n lines of a component's log, for failures.
func (s *Server) LogTail(name string, n int) string {
	data, _ := os.ReadFile(filepath.Join(s.dir, name+".log"))
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// AdminConfig is a cluster-admin client config. Use it to set up fixtures,
// never as the identity of the code under test.
func (s *Server) AdminConfig() *rest.Config {
	return &rest.Config{Host: s.URL, BearerToken: s.adminToken, TLSClientConfig: rest.TLSClientConfig{CAData: s.serverCA}}
}

// UserConfig authenticates with a client certificate, the way a kubelet
// does: NodeConfig("worker-0") is user system:node:worker-0 in group
// system:nodes.
func (s *Server) UserConfig(t testing.TB, user string, groups ...string) *rest.Config {
	t.Helper()
	certPEM, keyPEM := s.ca.IssueClient(t, user, groups)
	return &rest.Config{Host: s.URL, TLSClientConfig: rest.TLSClientConfig{CAData: s.serverCA, CertData: certPEM, KeyData: keyPEM}}
}

// NodeConfig is the credential of a node's kubelet.
func (s *Server) NodeConfig(t testing.TB, node string) *rest.Config {
	return s.UserConfig(t, "system:node:"+node, "system:nodes")
}

// TokenConfig authenticates with a bearer token (a ServiceAccount's).
func (s *Server) TokenConfig(token string) *rest.Config {
	return &rest.Config{Host: s.URL, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: s.serverCA}}
}

// WriteKubeconfig writes cfg as a kubeconfig file, for binaries under test.
func WriteKubeconfig(t testing.TB, cfg *rest.Config, path string) {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData, TLSServerName: cfg.ServerName}
	kc.AuthInfos["test"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken, ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "test"}
	kc.CurrentContext = "test"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
}

// RestartAPIServer stops kube-apiserver and starts it again on the same
// port with the same data, for tests of how clients ride out an outage.
// down runs while the apiserver is away.
func (s *Server) RestartAPIServer(t testing.TB, down func()) {
	t.Helper()
	s.mu.Lock()
	old := s.apiserver
	s.mu.Unlock()
	stopProcess(old)
	if down != nil {
		down()
	}
	bin := binDir()
	cmd := s.launch(t, "kube-apiserver", filepath.Join(bin, "kube-apiserver"), s.apiArgs...)
	s.mu.Lock()
	s.apiserver = cmd
	s.mu.Unlock()
	s.waitReady(t)
}

func (s *Server) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	stopProcess(s.apiserver)
	stopProcess(s.etcd)
}

// stopProcess sends SIGTERM to the process group, waits, then SIGKILLs.
func stopProcess(cmd *exec.Cmd) {
	if cmd == nil || cmd.Process == nil {
		return
	}
	pgid := cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-done
	}
}

func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var ls []net.Listener
	var ports []int
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		_ = l.Close()
	}
	return ports
}

func randomToken(t testing.TB) string {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", b)
}

func writePEM(t testing.TB, dir, name, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// WaitFor polls cond until it returns true or the timeout ends; a test
// helper for eventually-consistent checks (no timing assertions).
func WaitFor(ctx context.Context, timeout time.Duration, cond func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		ok, err := cond(ctx)
		if ok {
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("%w (last error: %v)", ctx.Err(), last)
			}
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
