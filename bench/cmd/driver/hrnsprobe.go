//go:build ignore

// This file is not part of the driver: the driver adds it to package main
// of hrns's cmd/hrns (with go build -overlay, its build constraint
// removed, the hrns tree untouched) to build the hrns serve it measures.
// The binary is then hrns itself plus this init function, which does
// nothing unless HRNS_BENCH_PROBE names an address: then it serves, on
// that address, GET /memory (the Go heap after a collection, and the
// goroutines, which only the process can see) and the net/http/pprof
// handlers, for the profiles of docs/performance.md.

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"runtime"
	rpprof "runtime/pprof"
	"strings"
)

func init() {
	addr := os.Getenv("HRNS_BENCH_PROBE")
	if addr == "" {
		return
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "hrns-bench-probe:", err)
		os.Exit(2)
	}
	fmt.Fprintf(os.Stderr, "hrns-bench-probe: http://%s\n", ln.Addr())
	mux := http.NewServeMux()
	mux.HandleFunc("GET /memory", func(w http.ResponseWriter, _ *http.Request) {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"heap_alloc":  ms.HeapAlloc,
			"heap_inuse":  ms.HeapInuse,
			"stack_inuse": ms.StackInuse,
			"sys":         ms.Sys,
			"goroutines":  runtime.NumGoroutine(),
			// The goroutines of net/http's kept-alive client
			// connections (two each: to the model provider, at most
			// 128 idle per host): a pool, not anything a session holds.
			"connection_goroutines": connectionGoroutines(),
		})
	})
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	go http.Serve(ln, mux)
}

// connectionGoroutines counts the goroutines in the read or write loop of
// a net/http client connection, from the goroutine profile.
func connectionGoroutines() int {
	var b bytes.Buffer
	if err := rpprof.Lookup("goroutine").WriteTo(&b, 1); err != nil {
		return 0
	}
	n := 0
	// debug=1: records separated by blank lines, each starting with
	// "COUNT @ ADDRESSES" and listing its frames.
	_, profile, _ := strings.Cut(b.String(), "\n") // the "goroutine profile: total N" line
	for _, rec := range strings.Split(profile, "\n\n") {
		if !strings.Contains(rec, "net/http.(*persistConn).readLoop") && !strings.Contains(rec, "net/http.(*persistConn).writeLoop") {
			continue
		}
		var count int
		if _, err := fmt.Sscanf(rec, "%d @", &count); err == nil {
			n += count
		}
	}
	return n
}
