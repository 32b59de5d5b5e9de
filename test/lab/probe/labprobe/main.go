// Command labprobe is the lab's traffic in a process of its own (package
// probe), started inside a namespace with `ip netns exec`:
//
//	labprobe echo -listen [::]:8080 -body node-0 -out echo.jsonl
//	labprobe poll -interval 50ms -timeout 250ms -out poll.jsonl URL...
//
// echo answers every HTTP request with -body; poll requests every URL
// each -interval over a new connection. Both record as JSON lines in -out
// (where echo listens, every request poll made, every stall of their
// own) until SIGTERM, then finish what is in flight and exit.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/vipctl/vipctl/test/lab/probe"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "labprobe:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return errors.New("usage: labprobe echo|poll [flags]")
	}
	mode := args[0]
	fs := flag.NewFlagSet("labprobe "+mode, flag.ContinueOnError)
	out := fs.String("out", "", "file the records are written to (JSON lines)")
	stallEvery := fs.Duration("stall-every", probe.StallEvery, "how often the process checks it is running")
	stallThreshold := fs.Duration("stall-threshold", probe.StallThreshold, "how late a check must be to record a stall")
	listen := fs.String("listen", "", "echo: the address to listen on")
	body := fs.String("body", "", "echo: what every answer says")
	interval := fs.Duration("interval", 0, "poll: time between two requests to one URL")
	timeout := fs.Duration("timeout", 0, "poll: how long a request may take")
	drain := fs.Duration("drain", 500*time.Millisecond, "echo: after SIGTERM, how long requests in flight may take before their connections are closed")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *out == "" {
		return errors.New("-out is required")
	}
	// Refused before the output file exists: a negative drain would close
	// every connection at once, a stall check needs a positive period.
	if *drain < 0 {
		return fmt.Errorf("-drain %v: must not be negative", *drain)
	}
	if *stallEvery <= 0 || *stallThreshold < 0 {
		return fmt.Errorf("-stall-every %v, -stall-threshold %v: the period must be positive, the threshold not negative", *stallEvery, *stallThreshold)
	}
	f, err := os.Create(*out)
	if err != nil {
		return err
	}
	w := probe.NewWriter(f)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	stalls := make(chan struct{})
	go func() { defer close(stalls); probe.WatchStalls(ctx, *stallEvery, *stallThreshold, w.Write) }()
	switch mode {
	case "echo":
		err = echo(ctx, *listen, *body, *drain, w)
	case "poll":
		if fs.NArg() == 0 || *interval <= 0 || *timeout <= 0 {
			err = errors.New("poll needs -interval, -timeout and at least one URL")
			break
		}
		probe.Poll(ctx, fs.Args(), *interval, *timeout, w.Write)
	default:
		err = fmt.Errorf("unknown mode %q", mode)
	}
	stop()
	<-stalls
	return errors.Join(err, w.Close(), f.Close())
}

func echo(ctx context.Context, addr, body string, drain time.Duration, w *probe.Writer) error {
	if addr == "" {
		return errors.New("echo needs -listen")
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	w.Write(probe.Record{Kind: probe.KindListening, Start: time.Now(), Addr: l.Addr().String()})
	// A client has as long to send its request as real servers give
	// (Go's own has no limit, nginx a minute): a client the machine's
	// load delayed must not find its connection closed for it.
	srv := &http.Server{Handler: probe.Echo(body), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	// As an application that drains: no new connection, idle ones
	// closed, requests in flight answered, for at most drain.
	sctx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return srv.Close()
	}
	return nil
}
