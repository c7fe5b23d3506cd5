package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/openai"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/server"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store"
	"github.com/hrns-dev/hrns/store/postgres"
	"github.com/hrns-dev/hrns/store/postgres/postgrestest"
	"github.com/hrns-dev/hrns/store/sqlite"
)

// openStore opens a benchmark's store, closed when it ends.
type openStore func(b *testing.B) store.Store

// benchStores runs fn on SQLite (synchronous = FULL), then on PostgreSQL
// (in a schema of its own on the test server; skipped when it is
// unreachable, see package postgrestest), so that the two compare side by
// side.
func benchStores(b *testing.B, fn func(b *testing.B, open openStore)) {
	b.Run("store=sqlite", func(b *testing.B) {
		fn(b, func(b *testing.B) store.Store {
			st, err := sqlite.Open(filepath.Join(b.TempDir(), "hrns.db"), nil)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { st.Close() })
			return st
		})
	})
	b.Run("store=postgres", func(b *testing.B) {
		fn(b, func(b *testing.B) store.Store {
			st, err := postgres.Open(b.Context(), postgrestest.DSN(b), nil)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { st.Close() })
			return st
		})
	})
}

// benchEnv is newEnv for benchmarks: the real HTTP server and store, and a
// model that calls the client tool at every step, signalling each request.
func benchEnv(b *testing.B, open openStore, start bool) (*env, chan struct{}) {
	b.Helper()
	requests := make(chan struct{}, 1<<16)
	model := openaitest.NewServer()
	b.Cleanup(model.Close)
	reply := openaitest.Reply{Func: func([]byte) openaitest.Reply {
		requests <- struct{}{}
		return openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall("call_1", "get_order_status", `{"order_id":"1"}`)}}
	}}
	for range 1 << 15 {
		model.Push(reply)
	}
	st := open(b)
	m := session.New(st, &openai.Client{BaseURL: model.URL(), Model: "test-model"}, &session.Options{MaxSteps: 1 << 20})
	if start {
		if err := m.Start(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	srv := httptest.NewServer(newServer(m, &server.Options{APIKeys: []string{keyAlice}}))
	b.Cleanup(func() {
		srv.Close()
		m.Stop(context.Background())
	})
	return &env{t: b, model: model, url: srv.URL, st: st, m: m}, requests
}

// BenchmarkCreateSession measures POST /api/v2/sessions: validation, one
// SQLite transaction (synchronous = FULL), the JSON answer. No worker runs.
func BenchmarkCreateSession(b *testing.B) {
	benchStores(b, func(b *testing.B, open openStore) {
		e, _ := benchEnv(b, open, false)
		start := time.Now()
		for b.Loop() {
			e.expect(e.do("POST", "/api/v2/sessions", keyAlice, orderAgent), http.StatusCreated)
		}
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "sessions/s")
	})
}

// BenchmarkToolResultRoundTrip measures a client tool step: from posting
// the result to the next model request reaching the model server (commit,
// wake-up, claim, resume, request).
func BenchmarkToolResultRoundTrip(b *testing.B) {
	benchStores(b, func(b *testing.B, open openStore) {
		e, requests := benchEnv(b, open, true)
		f := e.follow(keyAlice, e.create(keyAlice, orderAgent))
		<-requests
		f.status(session.StatusAwaitingToolResults)
		for b.Loop() {
			body := `{"kind":"tool_result","tool_req":{"tool_name":"get_order_status","id":"` + f.pending()[0].ID + `"},"result":"ok"}`
			e.expect(e.do("POST", "/api/v2/sessions/"+f.id+"/tool_results", keyAlice, body), http.StatusAccepted)
			<-requests
			b.StopTimer()
			f.status(session.StatusAwaitingToolResults)
			b.StartTimer()
		}
	})
}

// pausedSession creates a session of keyAlice's, waits for its first
// model request (on requests) and its tool call, pauses it and returns
// it followed. The wake-up benchmarks take a new one every ten samples,
// so that no session's inbox grows long.
func pausedSession(e *env, requests chan struct{}) *follower {
	f := e.follow(keyAlice, e.create(keyAlice, orderAgent))
	<-requests
	f.status(session.StatusAwaitingToolResults)
	e.expect(e.do("POST", "/api/v2/sessions/"+f.id+"/pause", keyAlice, nil), http.StatusAccepted)
	f.status(session.StatusPaused)
	return f
}

// BenchmarkLongPollWakeUp measures from sending a message to a paused
// session until a long-poll waiting on it returns with the event. As the
// bench driver's wake-up job does (bench/cmd/sessload), it pauses a new
// session every ten wake-ups: each message stays in its session's log,
// and on one session the benchmark timed a state growing by a message
// each time, not the wake-up.
func BenchmarkLongPollWakeUp(b *testing.B) {
	benchStores(b, func(b *testing.B, open openStore) {
		e, requests := benchEnv(b, open, true)
		var f *follower
		var total time.Duration
		i := 0
		for b.Loop() {
			b.StopTimer()
			if i%10 == 0 {
				f = pausedSession(e, requests)
			}
			i++
			done := make(chan time.Time)
			go func() {
				f.poll(25)
				done <- time.Now()
			}()
			time.Sleep(time.Millisecond) // let the poll wait
			b.StartTimer()
			sent := time.Now()
			e.expect(e.do("POST", "/api/v2/sessions/"+f.id+"/messages", keyAlice, `{"message":"ping"}`), http.StatusAccepted)
			total += (<-done).Sub(sent)
		}
		b.ReportMetric(float64(total.Nanoseconds())/float64(b.N), "ns/wakeup")
	})
}

// BenchmarkParkedSession measures what a session waiting for a tool result
// costs the server: heap and goroutines per parked session (the design
// says: no goroutine, its state in the store).
func BenchmarkParkedSession(b *testing.B) {
	benchStores(b, func(b *testing.B, open openStore) {
		e, requests := benchEnv(b, open, true)
		n := 0
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		goroutines := runtime.NumGoroutine()
		for b.Loop() {
			f := e.follow(keyAlice, e.create(keyAlice, orderAgent))
			<-requests
			f.status(session.StatusAwaitingToolResults)
			n++
		}
		time.Sleep(100 * time.Millisecond) // workers release their sessions
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(int64(after.HeapInuse)-int64(before.HeapInuse))/float64(n), "heap-bytes/session")
		b.ReportMetric(float64(runtime.NumGoroutine()-goroutines)/float64(n), "goroutines/session")
	})
}

// BenchmarkChangesFromMemory measures a long-poll answered at once from
// the session's last commits (no store read, no network): the handler,
// the manager's answer and its JSON.
func BenchmarkChangesFromMemory(b *testing.B) {
	model := openaitest.NewServer()
	b.Cleanup(model.Close)
	model.Push(openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall("call_1", "get_order_status", `{"order_id":"1"}`)}})
	st, err := sqlite.Open(filepath.Join(b.TempDir(), "hrns.db"), &sqlite.Options{RelaxedSync: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	m := session.New(st, &openai.Client{BaseURL: model.URL(), Model: "test-model"}, nil)
	if err := m.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	h := newServer(m, &server.Options{APIKeys: []string{keyAlice}})
	srv := httptest.NewServer(h)
	b.Cleanup(func() {
		srv.Close()
		m.Stop(context.Background())
	})
	e := &env{t: b, model: model, url: srv.URL, st: st}
	f := e.follow(keyAlice, e.create(keyAlice, orderAgent))
	f.status(session.StatusAwaitingToolResults)
	path := "/api/v2/sessions/" + f.id + "/changes?from_index=" + strconv.Itoa(len(f.events)-2) + "&wait_for_seconds=25"
	b.ReportAllocs()
	for b.Loop() {
		r := httptest.NewRequest("GET", path, nil)
		r.Header.Set("Authorization", "Bearer "+keyAlice)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			b.Fatal(w.Code, w.Body.String())
		}
	}
}

// committedAt is a store whose commits record when the store calls their
// Committed hook: once the transaction is committed (after the sync), the
// moment the time after a commit starts.
type committedAt struct {
	store.Store
	at chan time.Time
}

func (s *committedAt) UpdateSession(ctx context.Context, sess *store.Session, events []store.Event, o *store.UpdateOptions) error {
	if o != nil && o.Committed != nil {
		cp := *o
		committed := o.Committed
		cp.Committed = func(sess *store.Session, events []store.Event) {
			select {
			case s.at <- time.Now():
			default:
			}
			committed(sess, events)
		}
		o = &cp
	}
	return s.Store.UpdateSession(ctx, sess, events, o)
}

// writtenAt is a ResponseRecorder that records its first Write.
type writtenAt struct {
	*httptest.ResponseRecorder
	at time.Time
}

func (w *writtenAt) Write(b []byte) (int, error) {
	if w.at.IsZero() {
		w.at = time.Now()
	}
	return w.ResponseRecorder.Write(b)
}

// BenchmarkWokenLongPoll measures the part of a long-poll's wake-up that
// follows the commit's sync: from the store's commit (its Committed hook,
// on SQLite with synchronous = FULL) to the first byte of the woken
// long-poll's answer written by its handler (in process, no network),
// for a message posted to a paused session. Its metrics are the median
// of the samples (ns/after-sync-p50) and of the whole wake-up, from the
// POST sent to the answer's first write (ns/wakeup-p50, the sync
// included); ns/op is the whole loop, the long-poll's wait included. procs=1 is a server pinned to
// one CPU, as the bench driver pins it.
func BenchmarkWokenLongPoll(b *testing.B) {
	for _, procs := range []int{1, runtime.GOMAXPROCS(0)} {
		b.Run("procs="+strconv.Itoa(procs), func(b *testing.B) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			at := &committedAt{at: make(chan time.Time, 1)}
			e, requests := benchEnv(b, func(b *testing.B) store.Store {
				st, err := sqlite.Open(filepath.Join(b.TempDir(), "hrns.db"), nil)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { st.Close() })
				at.Store = st
				return at
			}, true)
			h := newServer(e.m, &server.Options{APIKeys: []string{keyAlice}})
			var f *follower
			var samples, wakeups []time.Duration
			i := 0
			for b.Loop() {
				b.StopTimer()
				if i%10 == 0 {
					f = pausedSession(e, requests)
				}
				i++
				for len(at.at) > 0 {
					<-at.at
				}
				w := &writtenAt{ResponseRecorder: httptest.NewRecorder()}
				done := make(chan struct{})
				go func() {
					r := httptest.NewRequest("GET", "/api/v2/sessions/"+f.id+"/changes?from_index="+strconv.Itoa(len(f.events))+"&wait_for_seconds=25", nil)
					r.Header.Set("Authorization", "Bearer "+keyAlice)
					h.ServeHTTP(w, r)
					close(done)
				}()
				time.Sleep(time.Millisecond) // let the poll wait
				b.StartTimer()
				sent := time.Now()
				e.expect(e.do("POST", "/api/v2/sessions/"+f.id+"/messages", keyAlice, `{"message":"ping"}`), http.StatusAccepted)
				<-done
				if w.Code != http.StatusOK {
					b.Fatal(w.Code, w.Body.String())
				}
				samples = append(samples, w.at.Sub(<-at.at))
				wakeups = append(wakeups, w.at.Sub(sent))
				var c changes
				if err := json.Unmarshal(w.Body.Bytes(), &c); err != nil || len(c.NewEvents) == 0 {
					b.Fatal(err, w.Body.String())
				}
				f.events = append(f.events, c.NewEvents...)
			}
			slices.Sort(samples)
			slices.Sort(wakeups)
			b.ReportMetric(float64(samples[len(samples)/2].Nanoseconds()), "ns/after-sync-p50")
			b.ReportMetric(float64(wakeups[len(wakeups)/2].Nanoseconds()), "ns/wakeup-p50")
		})
	}
}

// BenchmarkFrontDoor measures what the server spends on an API request
// around its handler (routing, the Host and Origin rules, the key, the
// path's checks, the write deadlines), with the cheapest of handlers: a
// GET of a session that does not exist, 404 from one SQLite read.
// "loopback" is a real client on a kept-alive loopback connection (its
// allocations count the client's too); "handler" calls ServeHTTP with a
// recorder, the server's part alone.
func BenchmarkFrontDoor(b *testing.B) {
	st, err := sqlite.Open(filepath.Join(b.TempDir(), "hrns.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	m := session.New(st, &openai.Client{BaseURL: "http://127.0.0.1:1", Model: "test-model"}, nil)
	h := newServer(m, &server.Options{APIKeys: []string{keyAlice}})
	const path = "/api/v2/sessions/0b6c1e3e-5d7a-4f7e-9a51-2f8f3c1d9e47"
	b.Run("handler", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			r := httptest.NewRequest("GET", path, nil)
			r.Header.Set("Authorization", "Bearer "+keyAlice)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != http.StatusNotFound {
				b.Fatal(w.Code, w.Body.String())
			}
		}
	})
	b.Run("loopback", func(b *testing.B) {
		srv := httptest.NewServer(h)
		b.Cleanup(srv.Close)
		c := srv.Client()
		req, err := http.NewRequest("GET", srv.URL+path, nil)
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+keyAlice)
		b.ReportAllocs()
		for b.Loop() {
			resp, err := c.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound {
				b.Fatal(resp.StatusCode)
			}
		}
	})
}
