// Package probe is the lab's traffic run outside the test process: an
// HTTP echo server and a poller of URLs, each in a process of its own
// (labprobe, started inside a namespace), so that what they measure is
// the network and the daemons, not the test process. A benchmark process
// running three sidecars with informer caches of thousands of Services
// stalls now and then (garbage collection, two busy cores); a server or
// client sharing it would report those stalls as failed requests.
//
// Both write what they saw as JSON lines (Record) that Read gives back.
// It has no dependency beyond the standard library: the binary stays
// small, and the test process reads the records with the same types.
package probe

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"strings"
	"sync"
	"time"
)

// Record kinds.
const (
	// KindListening: an echo server listens on Addr.
	KindListening = "listening"
	// KindRequest: one request of a poller.
	KindRequest = "request"
	// KindStall: the process was not scheduled for Lag beyond a sleep
	// that should have ended at Start.
	KindStall = "stall"
)

// A process checks it is running every StallEvery and records a stall
// when a check comes StallThreshold late or later: well below the lab
// pollers' 250 ms timeout, well above a scheduler's ordinary delays.
const (
	StallEvery     = 10 * time.Millisecond
	StallThreshold = 100 * time.Millisecond
)

// Record is one line of a labprobe's output.
type Record struct {
	Kind  string    `json:"kind"`
	Start time.Time `json:"start"`
	// Request: the URL, whether the TCP handshake completed, whether
	// the answer came (200, within the timeout), how long it took, the
	// answer's body (the echo server's name) or the error with how far
	// the request got.
	URL       string        `json:"url,omitempty"`
	Handshake bool          `json:"handshake,omitempty"`
	OK        bool          `json:"ok,omitempty"`
	Took      time.Duration `json:"took,omitempty"`
	Body      string        `json:"body,omitempty"`
	Err       string        `json:"err,omitempty"`
	// Stall: how much longer than asked a sleep took.
	Lag time.Duration `json:"lag,omitempty"`
	// Listening: the address.
	Addr string `json:"addr,omitempty"`
}

// Writer writes records as JSON lines from any goroutine, each line
// whole, flushed whenever no record is waiting so that a reader sees
// them within moments.
type Writer struct {
	records chan Record
	done    chan error
}

// NewWriter writes to w until Close.
func NewWriter(w io.Writer) *Writer {
	wr := &Writer{records: make(chan Record, 4096), done: make(chan error, 1)}
	go func() {
		bw := bufio.NewWriter(w)
		enc := json.NewEncoder(bw)
		var err error
		for r := range wr.records {
			err = errors.Join(err, enc.Encode(r))
			if len(wr.records) == 0 {
				err = errors.Join(err, bw.Flush())
			}
		}
		wr.done <- errors.Join(err, bw.Flush())
	}()
	return wr
}

// Write queues r. Not after Close.
func (w *Writer) Write(r Record) { w.records <- r }

// Close writes what is queued and reports the first error of all
// writes.
func (w *Writer) Close() error {
	close(w.records)
	return <-w.done
}

// Read reads the records of path. A last line without its newline is
// one being written, and left out.
func Read(path string) ([]Record, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if i := bytes.LastIndexByte(data, '\n'); i >= 0 {
		data = data[:i+1]
	} else {
		data = nil
	}
	var out []Record
	for n, line := range bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var r Record
		if err := json.Unmarshal(line, &r); err != nil {
			return out, fmt.Errorf("%s:%d: %w", path, n+1, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// Answered counts the good answers among records, by URL.
func Answered(records []Record) map[string]int {
	out := map[string]int{}
	for _, r := range records {
		if r.Kind == KindRequest && r.OK {
			out[r.URL]++
		}
	}
	return out
}

// Stalls are the stalls among records that overlap [from, to].
func Stalls(records []Record, from, to time.Time) []Record {
	var out []Record
	for _, r := range records {
		if r.Kind == KindStall && !r.Start.After(to) && !r.Start.Add(r.Lag).Before(from) {
			out = append(out, r)
		}
	}
	return out
}

// Echo answers every request with body.
func Echo(body string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, body) })
}

// Poll requests each of urls every interval, each over a new connection
// and without waiting for earlier requests, so that a stalled answer
// delays no later one; a request fails unless it is answered (200) within
// timeout. It returns when ctx ends and every request it started has
// been recorded.
func Poll(ctx context.Context, urls []string, interval, timeout time.Duration, record func(Record)) {
	c := &http.Client{Transport: Transport(nil, timeout), Timeout: timeout}
	var inFlight sync.WaitGroup
	for _, url := range urls {
		inFlight.Go(func() {
			tick := time.NewTicker(interval)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				// Not ctx: a request started before the end runs to
				// its answer or its timeout.
				inFlight.Go(func() { record(request(context.Background(), c, url)) })
			}
		})
	}
	inFlight.Wait()
}

// Transport is a poller's: a new connection per request, dialled by
// dial (nil: from here), each dial given up after timeout.
//
// net/http dials on after the request that started the dial gave up (a
// later request may use the connection). A poller starts a request
// every few milliseconds: through a multi-second outage thousands of
// connection attempts piled up and kept sending SYNs, the first after a
// second, and when the address answered again they all connected at
// once. The test process running a poller of 56 addresses took three
// more seconds to see the first answer (BenchmarkPeersScale, the
// default profile at 5000 Services: the handshakes with the new holder
// 2.8 s after the fault in a capture, the first answer recorded at 6 s).
func Transport(dial func(ctx context.Context, network, addr string) (net.Conn, error), timeout time.Duration) *http.Transport {
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	return &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			return dial(ctx, network, addr)
		},
	}
}

// request makes one request and tells how far it got.
func request(ctx context.Context, c *http.Client, url string) Record {
	r := Record{Kind: KindRequest, URL: url, Start: time.Now()}
	var tr trace
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		ConnectStart: func(_, _ string) { tr.set("connecting", false, "") },
		ConnectDone: func(_, _ string, err error) {
			if err == nil {
				tr.set("connected", true, "")
			}
		},
		GotConn:              func(i httptrace.GotConnInfo) { tr.set("", false, i.Conn.LocalAddr().String()) },
		WroteRequest:         func(httptrace.WroteRequestInfo) { tr.set("request written", false, "") },
		GotFirstResponseByte: func() { tr.set("answer started", false, "") },
	})
	body, err := Get(ctx, c, url)
	r.Took = time.Since(r.Start)
	r.Handshake = tr.handshakeDone()
	if err != nil {
		r.Err = fmt.Sprintf("started %s, %s: %v", r.Start.Format("15:04:05.000"), tr.String(), err)
		return r
	}
	r.OK, r.Body = true, body
	return r
}

// Get fetches url with c and returns the body, trimmed; a status other
// than 200 is an error.
func Get(ctx context.Context, c *http.Client, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("status %d", resp.StatusCode)
	}
	return strings.TrimSpace(string(body)), err
}

// trace is how far one request got: the stage tells a lost SYN from a
// stalled answer, the local address names the connection in a capture.
// Its callbacks may still run after the request gave up.
type trace struct {
	mu        sync.Mutex
	stage     string
	handshake bool
	local     string
}

func (t *trace) set(stage string, handshake bool, local string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if stage != "" {
		t.stage = stage
	}
	t.handshake = t.handshake || handshake
	if local != "" {
		t.local = local
	}
}

func (t *trace) handshakeDone() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.handshake
}

func (t *trace) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	stage := t.stage
	if stage == "" {
		stage = "not dialed"
	}
	if t.local == "" {
		return stage
	}
	return stage + " from " + t.local
}

// WatchStalls sleeps for every, over and over until ctx ends, and
// records each sleep that ended more than threshold late: a stretch in
// which the process was not running (a garbage collector's pause, CPU
// starvation, the machine itself stalling).
func WatchStalls(ctx context.Context, every, threshold time.Duration, record func(Record)) {
	tick := time.NewTimer(every)
	defer tick.Stop()
	due := time.Now().Add(every)
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if lag := time.Since(due); lag > threshold {
				record(Record{Kind: KindStall, Start: due, Lag: lag})
			}
			due = time.Now().Add(every)
			tick.Reset(every)
		}
	}
}
