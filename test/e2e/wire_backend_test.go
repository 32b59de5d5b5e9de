package e2e

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vipctl/test/lab"
)

// TestWireAPIBackendLost: a control-plane node that does not hold the API
// VIP drops off the segment without a word (its switch port). Its
// apiserver neither answers nor refuses: a connection haproxy opens to it
// waits. A client with a short timeout (lab.PollTimeout, 250 ms) keeps
// asking the API through the VIP and no request it starts after the node
// is gone may fail: the holder's haproxy gives up on the lost apiserver
// within its 100-ms connect timeout, retries the connection on another
// one, and sends no further client there (observe layer4, on-error
// mark-down), long before its checks (fall 2 at inter 1 s) would. The VIP
// stays where it is. Before that (a 5-s connect timeout) the client lost
// about one request in three for the 2–3 s the checks took (11 of them in
// one run). The request on its way to the lost apiserver as it goes may
// be lost with it (TLS passes through haproxy, which cannot resend what
// it has forwarded): one run in four or five lost that one, always
// started within the few milliseconds the cut itself took. The holder's
// own loss, where the VIP moves, is testAPIVIPHolderLost's (cluster
// lab).
func TestWireAPIBackendLost(t *testing.T) {
	lc := lab.Start(t, clusterYAML("default", "unicast", ""), masters(3))
	holder := lc.Settled(apiVIP)
	lost := "master-0"
	if lost == holder {
		lost = "master-1"
	}
	p := lc.Poll("https://"+apiVIP+":9445/", 10*time.Millisecond)
	lab.WaitFor(t, 10*time.Second, "answers through the VIP", func() bool { ok, _ := p.Counts(); return ok > 20 })
	// The loss at a random point of haproxy's 1-s check interval: a
	// fixed one would measure one phase of it only.
	time.Sleep(time.Duration(time.Now().UnixNano() % int64(time.Second)))
	cut := time.Now()
	lc.ByName[lost].Host.LinkDown()
	gone := time.Now()
	// Longer than the checks need to mark it down (about 3 s).
	time.Sleep(6 * time.Second)
	ok, failed := p.Stop()
	t.Logf("%s lost (%s holds the API VIP) %s–%s: %d of %d requests failed, the slowest answer took %s", lost, holder,
		cut.Format("15:04:05.000"), gone.Format("15:04:05.000"), failed, ok+failed, p.Slowest().Round(time.Millisecond))
	// The one request that may be on its way when the node goes (the
	// client waits for each answer) may be lost with it: haproxy passes
	// TLS through, and once it has forwarded a request to the lost
	// apiserver it cannot send that request elsewhere.
	var inFlight, lostAfter []string
	for i, started := range p.FailedStarts() {
		if started.Before(gone) {
			inFlight = append(inFlight, p.Errors()[i])
		} else {
			lostAfter = append(lostAfter, p.Errors()[i])
		}
	}
	if len(inFlight) > 0 {
		t.Logf("in flight as %s went, lost with it: %s", lost, strings.Join(inFlight, "; "))
	}
	if len(inFlight) > 1 || len(lostAfter) > 0 {
		t.Errorf("losing %s, which does not hold the API VIP, failed %d requests started after it went and %d before; want none and at most the one in flight:\n%s",
			lost, len(lostAfter), len(inFlight), strings.Join(p.Errors(), "\n"))
	}
	// Why and when the holder's haproxy took the lost server out.
	log, _ := os.ReadFile(lc.ByName[holder].Haproxy.Log)
	for _, line := range strings.Split(string(log), "\n") {
		if strings.HasPrefix(line, "[WARNING]") && strings.Contains(line, "/"+lost+" is DOWN") {
			t.Logf("%s's haproxy: %s", holder, line)
		}
	}
	// Cut off, the lost node takes the VIP on its own link (its stand-in
	// apiserver stays ready, unlike a real one without etcd's quorum):
	// only the others count.
	if got := slices.DeleteFunc(lc.Holders(apiVIP), func(n string) bool { return n == lost }); !slices.Equal(got, []string{holder}) {
		t.Errorf("losing %s moved the API VIP: held by %v among the others, was %s", lost, got, holder)
	}
}
