package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/client"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/openai"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/platform/quota"
	"github.com/hrns-dev/hrns/server"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store/sqlite"
)

// startFilesServer runs the real API on loopback with a workspaces
// directory and the session options given.
func startFilesServer(t *testing.T, opts *session.Options, replies ...openaitest.Reply) string {
	t.Helper()
	model := openaitest.NewServer(replies...)
	t.Cleanup(model.Close)
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "hrns.db"), &sqlite.Options{RelaxedSync: true})
	if err != nil {
		t.Fatal(err)
	}
	m := session.New(st, &openai.Client{BaseURL: model.URL(), Model: "test-model"}, opts)
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(newServer(m, &server.Options{APIKeys: []string{apiKey}, Workspaces: t.TempDir()}))
	t.Cleanup(func() {
		srv.Close()
		m.Stop(context.Background())
		st.Close()
	})
	return srv.URL
}

// TestFiles: the SDK writes, reads, pages through and fetches a session's
// files; errors match the SDK's sentinels.
func TestFiles(t *testing.T) {
	c := client.New(startFilesServer(t, nil), apiKey, nil)
	ctx := t.Context()
	s, err := c.CreateSession(ctx, &client.SessionRequest{Agent: client.AgentRef{Inline: &client.Agent{Name: "a"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := c.Session(s.ID)
	for _, name := range []string{"a.txt", "b.txt", "c/d.png"} {
		if err := h.WriteFile(ctx, name, []byte("data of "+name)); err != nil {
			t.Fatal(err)
		}
	}
	b, mod, err := h.ReadFile(ctx, "c/d.png")
	if err != nil || string(b) != "data of c/d.png" || mod.IsZero() {
		t.Errorf("ReadFile = %q, %v, %v", b, mod, err)
	}
	res, mt, err := h.Resource(ctx, "files", "c/d.png")
	if err != nil || string(res) != "data of c/d.png" || mt != "image/png" {
		t.Errorf("Resource(files, c/d.png) = %q, %q, %v", res, mt, err)
	}
	seen := map[string]bool{}
	opts := &client.ListFilesOptions{MaxEntries: 1}
	for range 4 {
		l, err := h.ListFiles(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range l.Files {
			seen[f.Path] = true
			opts.After = &f
		}
		if !l.Truncated {
			break
		}
	}
	if len(seen) != 3 || !seen["a.txt"] || !seen["b.txt"] || !seen["c"] {
		t.Errorf("paged listing saw %v", seen)
	}
	if _, _, err := h.ReadFile(ctx, "missing"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("ReadFile(missing) = %v, want ErrNotFound", err)
	}
	if err := h.WriteFile(ctx, "../out", []byte("x")); !errors.Is(err, client.ErrInvalid) {
		t.Errorf("WriteFile(../out) = %v, want ErrInvalid", err)
	}
}

// TestTokenQuotaNotRetried: a request refused by the token quota fails at
// once with ErrTokenQuotaExceeded (its Retry-After is hours away), and
// TokenQuota reports the use.
func TestTokenQuotaNotRetried(t *testing.T) {
	url := startFilesServer(t, &session.Options{TokenQuota: &quota.Tokens{Limit: 10, Period: quota.PeriodMonth}},
		openaitest.Reply{Text: "done", Usage: &llm.Usage{InputTokens: 30, OutputTokens: 3}})
	c := client.New(url, apiKey, &client.Options{MaxAttempts: 5, RetryDelay: time.Hour})
	ctx := t.Context()
	if _, err := c.RunSession(ctx, inline("Hi.")); err != nil {
		t.Fatal(err)
	}
	_, err := c.CreateSession(ctx, inline("Again."), nil)
	var ae *client.APIError
	if !errors.Is(err, client.ErrTokenQuotaExceeded) || errors.Is(err, client.ErrQuotaExceeded) || !errors.As(err, &ae) || ae.RetryAfter <= 0 {
		t.Fatalf("CreateSession over the token quota = %v", err)
	}
	q, err := c.TokenQuota(ctx)
	if err != nil || *q.Used != 33 || *q.Limit != 10 || *q.Remaining != 0 {
		t.Errorf("TokenQuota = %+v, %v", q, err)
	}
}

// ExampleHandle_WriteFile gives a session a file in its workspace, where
// its agent's file tools would find it, reads it back and lists it.
func ExampleHandle_WriteFile() {
	model := openaitest.NewServer()
	defer model.Close()
	dir, _ := os.MkdirTemp("", "hrns-example")
	defer os.RemoveAll(dir)
	st, _ := sqlite.Open(filepath.Join(dir, "hrns.db"), nil)
	defer st.Close()
	m := session.New(st, &openai.Client{BaseURL: model.URL(), Model: "test-model"}, nil)
	m.Start(context.Background())
	defer m.Stop(context.Background())
	workspaces := filepath.Join(dir, "sessions")
	os.Mkdir(workspaces, 0o700)
	srv := httptest.NewServer(newServer(m, &server.Options{APIKeys: []string{"sk-example"}, Workspaces: workspaces}))
	defer srv.Close()

	ctx := context.Background()
	c := client.New(srv.URL, "sk-example", nil)
	s, err := c.CreateSession(ctx, &client.SessionRequest{Agent: client.AgentRef{Inline: &client.Agent{Name: "analyst"}}}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	h := c.Session(s.ID)
	if err := h.WriteFile(ctx, "data/orders.csv", []byte("id,status\n4242,shipped\n")); err != nil {
		fmt.Println(err)
		return
	}
	b, _, _ := h.ReadFile(ctx, "data/orders.csv")
	fmt.Printf("%q\n", b)
	l, _ := h.ListFiles(ctx, &client.ListFilesOptions{Path: "data"})
	for _, f := range l.Files {
		fmt.Println(f.Path, f.SizeBytes)
	}
	_, _, err = h.ReadFile(ctx, "../hrns.db")
	fmt.Println(errors.Is(err, client.ErrInvalid))
	// Output:
	// "id,status\n4242,shipped\n"
	// data/orders.csv 23
	// true
}

// TestFeedbackAndSharedEvents: the feedback given is listed; a share URL
// gives the events without a key until it is revoked.
func TestFeedbackAndSharedEvents(t *testing.T) {
	c := client.New(startFilesServer(t, nil, openaitest.Reply{Text: "done"}), apiKey, nil)
	ctx := t.Context()
	res, err := c.RunSession(ctx, inline("Hi."))
	if err != nil {
		t.Fatal(err)
	}
	h := c.Session(res.SessionID)
	if err := h.EventFeedback(ctx, 1, client.Feedback{Success: true}); err != nil {
		t.Fatal(err)
	}
	l, err := h.ListFeedback(ctx)
	if err != nil || l.Session != nil || len(l.Events) != 1 || l.Events[0].EventIndex != 1 {
		t.Errorf("ListFeedback = %+v, %v", l, err)
	}
	link, err := h.Share(ctx)
	if err != nil {
		t.Fatal(err)
	}
	page, err := c.SharedEvents(ctx, link, 1, 2)
	if err != nil || len(page.Items) != 2 || page.Total < 3 {
		t.Errorf("SharedEvents = %+v, %v", page, err)
	}
	if err := h.Unshare(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SharedEvents(ctx, link, 1, 2); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("SharedEvents after Unshare = %v", err)
	}
	if _, err := c.SharedEvents(ctx, "https://elsewhere/x", 1, 2); err == nil {
		t.Error("SharedEvents took a URL that is not a share URL")
	}
}

// TestSharedEventsFollowTheCursor: with a read bound of one byte, each
// page of a share URL's events read from an index stops after its first
// event and gives NextIndex; SharedEventsFrom reads on from there,
// through every event. A page asked by number is whole.
func TestSharedEventsFollowTheCursor(t *testing.T) {
	c := client.New(startFilesServer(t, &session.Options{MaxReadBytes: 1}, openaitest.Reply{Text: "done"}), apiKey, nil)
	ctx := t.Context()
	res, err := c.RunSession(ctx, inline("Hi."))
	if err != nil {
		t.Fatal(err)
	}
	link, err := c.Session(res.SessionID).Share(ctx)
	if err != nil {
		t.Fatal(err)
	}
	whole, err := c.SharedEvents(ctx, link, 1, 50)
	if err != nil {
		t.Fatal(err)
	}
	if whole.NextIndex != nil || len(whole.Items) != whole.Total {
		t.Fatalf("page 1: %d of %d events, next_index %v", len(whole.Items), whole.Total, whole.NextIndex)
	}
	page, err := c.SharedEventsFrom(ctx, link, 0, 50)
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	for {
		for _, e := range page.Items {
			got = append(got, e.Index)
		}
		if page.NextIndex == nil {
			break
		}
		if len(page.Items) != 1 {
			t.Fatalf("a cut page of %d events", len(page.Items))
		}
		if page, err = c.SharedEventsFrom(ctx, link, *page.NextIndex, 50); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != page.Total || len(got) < 3 {
		t.Fatalf("read %v of %d events", got, page.Total)
	}
	for i, idx := range got {
		if idx != int64(i) {
			t.Fatalf("read %v, want every index in order", got)
		}
	}
}

// ExampleClient_TokenQuota reads the key's token quota: the server allows
// each key 50,000 tokens a day.
func ExampleClient_TokenQuota() {
	model := openaitest.NewServer()
	defer model.Close()
	dir, _ := os.MkdirTemp("", "hrns-example")
	defer os.RemoveAll(dir)
	st, _ := sqlite.Open(filepath.Join(dir, "hrns.db"), nil)
	defer st.Close()
	m := session.New(st, &openai.Client{BaseURL: model.URL(), Model: "test-model"}, &session.Options{
		TokenQuota: &quota.Tokens{Limit: 50_000, Period: quota.PeriodDay},
	})
	m.Start(context.Background())
	defer m.Stop(context.Background())
	srv := httptest.NewServer(newServer(m, &server.Options{APIKeys: []string{"sk-example"}}))
	defer srv.Close()

	c := client.New(srv.URL, "sk-example", nil)
	q, err := c.TokenQuota(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("limit", *q.Limit, "used", *q.Used, "remaining", *q.Remaining, "window", q.WindowEnd.Sub(q.WindowStart))
	// Output:
	// limit 50000 used 0 remaining 50000 window 24h0m0s
}
