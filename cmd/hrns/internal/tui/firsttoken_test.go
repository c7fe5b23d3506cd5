package tui

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/hrns-dev/hrns/openai"
)

// firstTokenServer is an OpenAI Chat Completions endpoint over loopback
// that streams an answer whose first event carries the token: it notes
// when it writes that event (the provider's first byte), then holds the
// rest of the stream until released.
type firstTokenServer struct {
	*httptest.Server
	mu      sync.Mutex
	token   string
	n       int           // requests served
	sent    time.Time     // when the first event was written
	release chan struct{} // the rest of the stream may go
}

func newFirstTokenServer(tb testing.TB) *firstTokenServer {
	s := &firstTokenServer{release: make(chan struct{}, 1)}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		s.mu.Lock()
		token := s.token
		s.mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		// The model's time to its first token: spread over 20 ms, so
		// that the first byte comes at any time of the chat's frame
		// (a change within a frame of the last draw waits for the
		// frame's end; Bubble Tea's renderer wrote only on a ticker:
		// a stream started right after a frame always waited).
		s.mu.Lock()
		s.n++
		think := time.Duration(s.n*7919%20000) * time.Microsecond
		s.mu.Unlock()
		time.Sleep(think)
		first := `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"` + token + `"},"finish_reason":null}]}` + "\n\n"
		s.mu.Lock()
		s.sent = time.Now()
		s.mu.Unlock()
		io.WriteString(w, first)
		w.(http.Flusher).Flush()
		select {
		case <-s.release:
		case <-r.Context().Done():
			return
		case <-time.After(30 * time.Second):
		}
		io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" end`+token+`."},"finish_reason":"stop"}]}`+"\n\n"+
			`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":2,"total_tokens":12}}`+"\n\ndata: [DONE]\n\n")
	}))
	tb.Cleanup(s.Close)
	return s
}

// screenWatch is the chat's terminal: it notes when a write first holds
// the awaited text, and when a write holds the text that says the run
// ended.
type screenWatch struct {
	mu     sync.Mutex
	want   []byte
	shown  chan time.Time
	idle   []byte
	idleCh chan struct{}
}

func (s *screenWatch) Write(p []byte) (int, error) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.want != nil && bytes.Contains(p, s.want) {
		s.want = nil
		s.shown <- now
	}
	if s.idle != nil && bytes.Contains(p, s.idle) {
		s.idle = nil
		close(s.idleCh)
	}
	return len(p), nil
}

func (s *screenWatch) await(token, idle string) (<-chan time.Time, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.want, s.shown = []byte(token), make(chan time.Time, 1)
	s.idle, s.idleCh = []byte(idle), make(chan struct{})
	return s.shown, s.idleCh
}

// BenchmarkFirstTokenOnScreen is the time from the provider's first byte
// of an answer to the chat writing that answer's first token to the
// terminal: the whole chat (Bubble Tea program, the loop, the OpenAI
// client) against a streaming endpoint over loopback, a message typed
// on its input for each answer. "raw" is the same endpoint read by a
// plain HTTP client up to the same token, in the same run. It reports the
// median and the largest delay (ns), over the answers.
func BenchmarkFirstTokenOnScreen(b *testing.B) {
	srv := newFirstTokenServer(b)
	b.Run("raw", func(b *testing.B) {
		var d []time.Duration
		for i := 0; b.Loop(); i++ {
			token := fmt.Sprintf("Tok%dzq", i)
			srv.mu.Lock()
			srv.token = token
			srv.mu.Unlock()
			resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", bytes.NewReader([]byte(`{}`)))
			if err != nil {
				b.Fatal(err)
			}
			var buf []byte
			p := make([]byte, 4096)
			for !bytes.Contains(buf, []byte(token)) {
				n, err := resp.Body.Read(p)
				buf = append(buf, p[:n]...)
				if err != nil {
					b.Fatal(err)
				}
			}
			got := time.Now()
			srv.mu.Lock()
			d = append(d, got.Sub(srv.sent))
			srv.mu.Unlock()
			srv.release <- struct{}{}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		reportDelays(b, d)
	})
	b.Run("chat", func(b *testing.B) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		inR, inW := io.Pipe()
		watch := &screenWatch{}
		cfg := &Config{
			Model:     openai.New(&openai.Options{BaseURL: srv.URL + "/v1", APIKey: "k", Model: "m"}),
			ModelName: "m",
			Workdir:   b.TempDir(),
			Input:     inR,
			Output:    watch,
		}
		// Run's program, with the size a terminal would give.
		c := newChat(ctx, cfg)
		defer c.stop()
		// When the chunk holding the token reaches the chat's Update.
		var updMu sync.Mutex
		var updated time.Time
		var want string
		filter := tea.WithFilter(func(_ tea.Model, msg tea.Msg) tea.Msg {
			if m, ok := msg.(chunkMsg); ok && strings.Contains(m.chunk.Content, "Tok") {
				updMu.Lock()
				if want != "" && strings.Contains(m.chunk.Content, want) {
					updated, want = time.Now(), ""
				}
				updMu.Unlock()
			}
			return msg
		})
		done := make(chan error, 1)
		go func() { done <- runProgram(ctx, c, inR, watch, nil, tea.WithWindowSize(100, 30), filter) }()
		var d, u []time.Duration
		for i := 0; b.Loop(); i++ {
			token := fmt.Sprintf("Tok%dzq", i)
			srv.mu.Lock()
			srv.token = token
			srv.mu.Unlock()
			updMu.Lock()
			want = token
			updMu.Unlock()
			shown, idle := watch.await(token, "end"+token+".")
			if _, err := io.WriteString(inW, fmt.Sprintf("q%d\r", i)); err != nil {
				b.Fatal(err)
			}
			select {
			case t := <-shown:
				srv.mu.Lock()
				d = append(d, t.Sub(srv.sent))
				updMu.Lock()
				u = append(u, updated.Sub(srv.sent))
				updMu.Unlock()
				srv.mu.Unlock()
			case err := <-done:
				b.Fatalf("the chat ended: %v", err)
			case <-time.After(30 * time.Second):
				b.Fatal("the token never reached the screen")
			}
			srv.release <- struct{}{}
			select {
			case <-idle:
			case <-time.After(30 * time.Second):
				b.Fatal("the answer never ended on the screen")
			}
		}
		b.StopTimer()
		reportDelays(b, d)
		slices.Sort(u)
		b.ReportMetric(float64(u[len(u)/2].Nanoseconds()), "update-p50-ns")
		cancel()
		inW.Close()
		<-done
	})
}

func reportDelays(b *testing.B, d []time.Duration) {
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(d[len(d)-1].Nanoseconds()), "max-ns")
	b.ReportMetric(0, "ns/op")
}
