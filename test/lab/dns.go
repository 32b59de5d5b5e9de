package lab

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vipctl/test/netlab"
)

// DNSServer is Debian's named (bind9), authoritative for one zone, on a
// lab host: the DNS server an admin fills from `vipctl render`'s
// records.
type DNSServer struct {
	// Zone is the zone's name, without the trailing dot.
	Zone string
	proc *netlab.Proc
}

// StartDNS starts named on h, answering on h's addresses listen (without
// prefix lengths; the first must be IPv4) as the only server of zone,
// with the master-file records (absolute names, as records.zone has them)
// beneath its own SOA and NS. named-checkzone judges the zone first, and
// StartDNS returns once named has loaded it. It is stopped by PID when
// the test ends.
func StartDNS(t testing.TB, h *netlab.Host, zone string, listen []string, records []byte) *DNSServer {
	t.Helper()
	dir := t.TempDir()
	zoneFile := filepath.Join(dir, zone+".zone")
	head := fmt.Sprintf("$TTL 300\n@ IN SOA ns.%[1]s. hostmaster.%[1]s. 1 3600 600 86400 300\n@ IN NS ns.%[1]s.\nns.%[1]s. IN A %[2]s\n", zone, listen[0])
	writeLabFile(t, zoneFile, append([]byte(head), records...))
	if out, err := exec.Command("named-checkzone", zone, zoneFile).CombinedOutput(); err != nil {
		t.Fatalf("named-checkzone %s: %v\n%s", zone, err, out)
	}
	var v4, v6 []string
	for _, a := range listen {
		if strings.Contains(a, ":") {
			v6 = append(v6, a+";")
		} else {
			v4 = append(v4, a+";")
		}
	}
	listenV6 := "none;"
	if len(v6) > 0 {
		listenV6 = strings.Join(v6, " ")
	}
	// Everything in the test's directory: no /etc/bind, /var/cache/bind or
	// /run/named of the machine's, no control channel.
	conf := filepath.Join(dir, "named.conf")
	writeLabFile(t, conf, fmt.Appendf(nil, `options {
	directory "%[1]s";
	pid-file "%[1]s/named.pid";
	session-keyfile "%[1]s/session.key";
	managed-keys-directory "%[1]s";
	listen-on { %[2]s };
	listen-on-v6 { %[3]s };
	recursion no;
	dnssec-validation no;
};
controls { };
zone "%[4]s" { type primary; file "%[5]s"; };
`, dir, strings.Join(v4, " "), listenV6, zone, zoneFile))
	s := &DNSServer{Zone: zone, proc: h.Start("named", "named", "-g", "-n", "1", "-c", conf)}
	if !WaitUntil(20*time.Second, func() bool {
		data, _ := os.ReadFile(s.proc.Log)
		return strings.Contains(string(data), "\nrunning") || strings.Contains(string(data), " running\n") || s.proc.Exited()
	}) || s.proc.Exited() {
		t.Fatalf("named on %s did not start:\n%s", h.Name, s.proc.LogTail(30))
	}
	return s
}

// Stop stops named by PID.
func (s *DNSServer) Stop() { s.proc.Stop() }

func writeLabFile(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
