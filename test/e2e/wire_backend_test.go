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
// asking the API through the VIP and no request of it may fail: the
// holder's haproxy gives up on the lost apiserver within its 100-ms
// connect timeout, retries the connection on another one, and sends no
// further client there (observe layer4, on-error mark-down), long before
// its checks (fall 2 at inter 1 s) would. The VIP stays where it is.
// Before that the client lost about one request in three for the 2–3 s
// the checks took (11 of them in one run). The holder's own loss, where
// the VIP moves, is testAPIVIPHolderLost's (cluster lab).
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
	lc.ByName[lost].Host.LinkDown()
	// Longer than the checks need to mark it down (about 3 s).
	time.Sleep(6 * time.Second)
	ok, failed := p.Stop()
	t.Logf("%s lost (%s holds the API VIP): %d of %d requests failed", lost, holder, failed, ok+failed)
	if failed > 0 {
		t.Errorf("losing %s, which does not hold the API VIP, failed %d requests; want none:\n%s", lost, failed, strings.Join(p.Errors(), "\n"))
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
