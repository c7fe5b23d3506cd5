// Command mock serves the benchmarks' mock model (see package
// [github.com/hrns-dev/hrns/bench/internal/mock]) until it is interrupted.
//
//	go run ./cmd/mock --addr 127.0.0.1:0
//
// It prints the API root to give clients, such as
// http://127.0.0.1:40123/v1, as its first line on stdout. GET /stats on the
// same host serves the counts, and GET /arrivals?from=N the arrival times of
// the requests with --record-arrivals.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/hrns-dev/hrns/bench/internal/mock"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "mock:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	var (
		addr string
		o    mock.Options
	)
	fs := flag.NewFlagSet("mock", flag.ContinueOnError)
	fs.StringVar(&addr, "addr", "127.0.0.1:0", "address to listen on")
	fs.IntVar(&o.ToolCalls, "tool-calls", 0, "tool calls per run before the final answer (default 5)")
	fs.IntVar(&o.ArgChunks, "arg-chunks", 0, "deltas a call's arguments are split over (default 8)")
	fs.IntVar(&o.TextChunks, "text-chunks", 0, "content chunks of the final answer (default 100)")
	fs.IntVar(&o.Parallel, "parallel", 0, "calls of each tool turn, streamed in one answer (default 1)")
	fs.BoolVar(&o.FlushEachEvent, "flush-each-event", false, "flush after every event instead of writing each body at once")
	fs.BoolVar(&o.RecordArrivals, "record-arrivals", false, "note when each chat completion request arrives (GET /arrivals?from=N)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	m := mock.New(&o)
	srv := &http.Server{Handler: m, ConnState: m.ConnState}
	fmt.Fprintf(stdout, "http://%s/v1\n", ln.Addr())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	if err := srv.Shutdown(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
