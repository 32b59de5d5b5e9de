package probe

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestPoll tells an answer, an answer too late (connected, then the
// timeout) and a refused connection (no handshake) apart, and reads them
// back through Writer and Read.
func TestPoll(t *testing.T) {
	t.Parallel()
	answering := httptest.NewServer(Echo("node-0"))
	defer answering.Close()
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
	defer slow.Close()
	defer close(release) // before slow.Close, which waits for its handlers
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + l.Addr().String() + "/"
	_ = l.Close()

	path := filepath.Join(t.TempDir(), "poll.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := NewWriter(f)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	Poll(ctx, []string{answering.URL, slow.URL, refused}, 50*time.Millisecond, 100*time.Millisecond, w.Write)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	records, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	byURL := map[string][]Record{}
	for _, r := range records {
		if r.Kind == KindRequest {
			byURL[r.URL] = append(byURL[r.URL], r)
		}
	}
	for _, tc := range []struct {
		name, url     string
		ok, handshake bool
		body, err     string
	}{
		{name: "answered", url: answering.URL, ok: true, handshake: true, body: "node-0"},
		{name: "answer too late", url: slow.URL, handshake: true, err: "request written from 127.0.0.1:"},
		{name: "refused", url: refused, err: "connecting: "},
	} {
		got := byURL[tc.url]
		if len(got) < 4 {
			t.Errorf("%s: %d requests in 300 ms at 50 ms; want at least 4", tc.name, len(got))
		}
		for _, r := range got {
			if r.OK != tc.ok || r.Handshake != tc.handshake || r.Body != tc.body || !strings.Contains(r.Err, tc.err) || (tc.err == "") != (r.Err == "") {
				t.Errorf("%s: %+v; want ok %v, handshake %v, body %q, error containing %q", tc.name, r, tc.ok, tc.handshake, tc.body, tc.err)
			}
		}
	}
}

// TestPollDoesNotWait: a request that hangs delays no later one, and
// Poll returns only once the hanging ones have been recorded.
func TestPollDoesNotWait(t *testing.T) {
	t.Parallel()
	slow := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { time.Sleep(time.Second) }))
	defer slow.Close()
	var mu sync.Mutex
	var starts []time.Time
	ctx, cancel := context.WithTimeout(context.Background(), 520*time.Millisecond)
	defer cancel()
	begun := time.Now()
	Poll(ctx, []string{slow.URL}, 50*time.Millisecond, 400*time.Millisecond, func(r Record) {
		mu.Lock()
		defer mu.Unlock()
		starts = append(starts, r.Start)
	})
	if took := time.Since(begun); took < 800*time.Millisecond {
		t.Errorf("Poll returned after %s, before its last request's timeout", took)
	}
	if len(starts) < 8 {
		t.Errorf("%d requests started in 520 ms at 50 ms while each hung for 400 ms; want at least 8", len(starts))
	}
}

func TestReadLeavesOutAPartialLine(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "r.jsonl")
	data := `{"kind":"stall","start":"2025-01-02T03:04:05Z","lag":150000000}` + "\n" + `{"kind":"requ`
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Kind != KindStall || got[0].Lag != 150*time.Millisecond {
		t.Errorf("Read = %+v; want the one whole stall record", got)
	}
}

func TestWatchStalls(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	var got []Record
	// A threshold below zero records every check: that the records come,
	// with their lag, is what can be tested without stalling the process.
	WatchStalls(ctx, 20*time.Millisecond, -time.Hour, func(r Record) { got = append(got, r) })
	if len(got) < 5 {
		t.Fatalf("%d checks in 200 ms at 20 ms; want at least 5", len(got))
	}
	for _, r := range got {
		if r.Kind != KindStall || r.Start.IsZero() || r.Lag < 0 {
			t.Errorf("%+v: want a stall with its start and lag", r)
		}
	}
}
