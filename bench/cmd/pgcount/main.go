// Command pgcount is a TCP proxy in front of a PostgreSQL server that counts
// what its clients ask of it, by reading the frontend/backend protocol (v3)
// in both directions: round trips (ReadyForQuery messages: one per simple
// query and one per Sync of the extended protocol), statements executed
// (CommandComplete), rows returned (DataRow) and rows written (the counts of
// INSERT, UPDATE and DELETE command tags), notifications delivered, cancel
// requests, bytes each way, and executions by SQL text (as
// pg_stat_statements would count calls, for a server without it). It serves the counts as JSON on GET /counts of a second
// address, and resets them on POST /reset.
//
//	pgcount --listen 127.0.0.1:6543 --upstream 127.0.0.1:5432 --http 127.0.0.1:6544
//
// It is for measuring, on loopback, what hrns serve costs a PostgreSQL
// server per session turn (see docs/deploy.md); it handles only connections
// without TLS (sslmode=disable).
package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// counts are what the proxy has seen since the last reset.
type counts struct {
	Connections   atomic.Int64 `json:"connections"`
	Cancels       atomic.Int64 `json:"cancel_requests"`
	RoundTrips    atomic.Int64 `json:"round_trips"`
	SimpleQueries atomic.Int64 `json:"simple_queries"`
	Parses        atomic.Int64 `json:"parses"`
	Executes      atomic.Int64 `json:"executes"`
	Statements    atomic.Int64 `json:"statements"`
	RowsReturned  atomic.Int64 `json:"rows_returned"`
	RowsWritten   atomic.Int64 `json:"rows_written"`
	Notifications atomic.Int64 `json:"notifications"`
	Errors        atomic.Int64 `json:"errors"`
	BytesToServer atomic.Int64 `json:"bytes_to_server"`
	BytesToClient atomic.Int64 `json:"bytes_to_client"`

	mu    sync.Mutex
	tags  map[string]int64 // statements by the first word of their tag
	execs map[string]int64 // executions by SQL text (Bind of a parsed statement, or a simple query)
}

func (c *counts) reset() {
	for _, v := range []*atomic.Int64{&c.Connections, &c.Cancels, &c.RoundTrips, &c.SimpleQueries, &c.Parses, &c.Executes,
		&c.Statements, &c.RowsReturned, &c.RowsWritten, &c.Notifications, &c.Errors, &c.BytesToServer, &c.BytesToClient} {
		v.Store(0)
	}
	c.mu.Lock()
	c.tags = map[string]int64{}
	c.execs = map[string]int64{}
	c.mu.Unlock()
}

// exec counts one execution of sql.
func (c *counts) exec(sql string) {
	sql = strings.Join(strings.Fields(sql), " ")
	if len(sql) > 160 {
		sql = sql[:160] + "..."
	}
	c.mu.Lock()
	c.execs[sql]++
	c.mu.Unlock()
}

func (c *counts) MarshalJSON() ([]byte, error) {
	c.mu.Lock()
	tags := make(map[string]int64, len(c.tags))
	for k, v := range c.tags {
		tags[k] = v
	}
	execs := make(map[string]int64, len(c.execs))
	for k, v := range c.execs {
		execs[k] = v
	}
	c.mu.Unlock()
	return json.Marshal(map[string]any{
		"connections": c.Connections.Load(), "cancel_requests": c.Cancels.Load(), "round_trips": c.RoundTrips.Load(),
		"simple_queries": c.SimpleQueries.Load(), "parses": c.Parses.Load(), "executes": c.Executes.Load(),
		"statements": c.Statements.Load(), "rows_returned": c.RowsReturned.Load(), "rows_written": c.RowsWritten.Load(),
		"notifications": c.Notifications.Load(), "errors": c.Errors.Load(),
		"bytes_to_server": c.BytesToServer.Load(), "bytes_to_client": c.BytesToClient.Load(),
		"statements_by_tag": tags, "executions_by_sql": execs,
	})
}

func main() {
	listen := flag.String("listen", "127.0.0.1:6543", "address to accept PostgreSQL clients on")
	upstream := flag.String("upstream", "127.0.0.1:5432", "the PostgreSQL server")
	httpAddr := flag.String("http", "127.0.0.1:6544", "address of GET /counts and POST /reset")
	flag.Parse()

	c := &counts{}
	c.reset()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	http.HandleFunc("GET /counts", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(c)
	})
	http.HandleFunc("POST /reset", func(w http.ResponseWriter, _ *http.Request) { c.reset() })
	go func() { log.Fatal(http.ListenAndServe(*httpAddr, nil)) }()
	fmt.Fprintf(os.Stderr, "pgcount: %s -> %s, counts on http://%s/counts\n", ln.Addr(), *upstream, *httpAddr)
	for {
		conn, err := ln.Accept()
		if err != nil {
			log.Fatal(err)
		}
		go proxy(conn, *upstream, c)
	}
}

// proxy relays one client connection, counting.
func proxy(client net.Conn, upstream string, c *counts) {
	defer client.Close()
	server, err := net.Dial("tcp", upstream)
	if err != nil {
		log.Printf("pgcount: %v", err)
		return
	}
	defer server.Close()
	c.Connections.Add(1)
	done := make(chan struct{}, 2)
	go func() { relay(server, client, true, c); done <- struct{}{} }()
	go func() { relay(client, server, false, c); done <- struct{}{} }()
	<-done
}

// maxMessage bounds a message the proxy reads whole; larger ones are
// passed through without being looked at.
const maxMessage = 1 << 30

// relay copies messages from src to dst. fromClient marks the frontend
// side, whose first message (the startup message) has no type byte.
func relay(dst io.Writer, src io.Reader, fromClient bool, c *counts) {
	r := bufio.NewReaderSize(src, 64<<10)
	w := bufio.NewWriterSize(dst, 64<<10)
	defer w.Flush()
	first := fromClient
	var hdr [5]byte
	stmts := map[string]string{} // the connection's prepared statements: name -> SQL
	for {
		var typ byte
		if first {
			if _, err := io.ReadFull(r, hdr[1:5]); err != nil {
				return
			}
		} else if _, err := io.ReadFull(r, hdr[:5]); err != nil {
			return
		} else {
			typ = hdr[0]
		}
		n := int(binary.BigEndian.Uint32(hdr[1:5])) - 4
		if n < 0 || n > maxMessage {
			log.Printf("pgcount: message of %d bytes", n)
			return
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(r, body); err != nil {
			return
		}
		if first {
			// A CancelRequest (code 80877102) comes on a connection of
			// its own, which it is the whole of.
			if n >= 4 && binary.BigEndian.Uint32(body[:4]) == 80877102 {
				c.Cancels.Add(1)
			}
			w.Write(hdr[1:5])
			first = false
		} else {
			w.Write(hdr[:5])
		}
		w.Write(body)
		size := int64(n + 5)
		if fromClient {
			c.BytesToServer.Add(size)
			switch typ {
			case 'Q':
				c.SimpleQueries.Add(1)
				c.exec(cstring(body))
			case 'P':
				c.Parses.Add(1)
				name := cstring(body)
				sql := cstring(body[min(len(name)+1, len(body)):])
				if name == "" {
					stmts[""] = sql // the unnamed statement
				} else if len(stmts) < 10000 {
					stmts[name] = sql
				}
			case 'B':
				portal := cstring(body)
				name := cstring(body[min(len(portal)+1, len(body)):])
				c.exec(stmts[name])
			case 'E':
				c.Executes.Add(1)
			}
		} else {
			c.BytesToClient.Add(size)
			switch typ {
			case 'Z':
				c.RoundTrips.Add(1)
			case 'D':
				c.RowsReturned.Add(1)
			case 'A':
				c.Notifications.Add(1)
			case 'E':
				c.Errors.Add(1)
			case 'C':
				c.Statements.Add(1)
				c.tag(body)
			}
		}
		// Flush when the reader has nothing more buffered, so that a
		// message waited on is never held back.
		if r.Buffered() == 0 {
			if err := w.Flush(); err != nil {
				return
			}
		}
	}
}

// cstring returns the NUL-terminated string b starts with.
func cstring(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return string(b[:i])
	}
	return string(b)
}

// tag counts a CommandComplete: its command, and the rows it wrote.
func (c *counts) tag(body []byte) {
	body = bytes.TrimRight(body, "\x00")
	fields := bytes.Fields(body)
	if len(fields) == 0 {
		return
	}
	cmd := string(fields[0])
	c.mu.Lock()
	c.tags[cmd]++
	c.mu.Unlock()
	switch cmd {
	case "INSERT", "UPDATE", "DELETE":
		if n, err := strconv.ParseInt(string(fields[len(fields)-1]), 10, 64); err == nil {
			c.RowsWritten.Add(n)
		}
	}
}
