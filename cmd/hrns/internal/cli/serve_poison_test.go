package cli

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hrns-dev/hrns/client"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/session"
)

// TestServePoisonSessions runs hrns serve as a real process with poison
// sessions among healthy ones: one whose stored state is corrupted in the
// database file, one whose run takes the process down (here kill -9, as a
// fatal error or the OOM killer would) every time it is tried, and one
// whose model writes malformed tool-call arguments (which made the server
// panic before they were carried as written). The first two fail alone
// with error_code internal: the corrupt one at once, the other once it was
// tried the manager's bound of times (3). The one with malformed arguments
// and the sessions created along with them complete, the process that gives up
// on the poison stays up, and after a restart neither is tried again.
func TestServePoisonSessions(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the hrns binary")
	}
	dir := t.TempDir()
	hrnsBinary(t) // built before the clock of the test starts

	// The model answers, except to the poison sessions: it tells the test
	// and holds their requests, so that the test kills the server while
	// it runs them.
	stop := make(chan struct{})
	asked := make(chan string, 100)
	step := func(body []byte) openaitest.Reply {
		if bytes.Contains(body, []byte("poison-args")) && !bytes.Contains(body, []byte(`"role":"tool"`)) {
			// Arguments cut short, as small models write them.
			return openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall("call_1", "get_order_status", `{"order_id": "4242"`)}}
		}
		for _, poison := range []string{"poison-corrupt", "poison-crash"} {
			if bytes.Contains(body, []byte(poison)) {
				asked <- poison
				select {
				case <-stop:
				case <-time.After(time.Minute):
				}
				return openaitest.Reply{Text: "too late"}
			}
		}
		return openaitest.Reply{Text: "fine"}
	}
	model := openaitest.NewServer()
	defer model.Close()
	defer close(stop) // before Close, which waits for the held requests
	for range 200 {
		model.Push(openaitest.Reply{Func: step})
	}

	addr := freeAddr(t)
	home := t.TempDir()
	db := filepath.Join(dir, "sessions.db")
	var logs syncBuffer
	defer func() {
		if t.Failed() {
			t.Logf("server logs:\n%s", logs.String())
		}
	}()
	start := func() *exec.Cmd {
		t.Helper()
		return startServeProcess(t, addr, []string{"--db", "sqlite:" + db, "--model", "test-model"},
			[]string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "XDG_CONFIG_HOME=" + home, "OPENAI_BASE_URL=" + model.URL(), "OPENAI_API_KEY=test", "HRNS_API_KEYS=sk-poison"}, &logs, logs.String)
	}
	kill := func(cmd *exec.Cmd) {
		t.Helper()
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()
	}

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c := client.New("http://"+addr, "sk-poison", &client.Options{RetryDelay: 50 * time.Millisecond, MaxAttempts: 40, PollWait: 5 * time.Second})
	var wg sync.WaitGroup
	tool := loop.NewTool("get_order_status", "Look up the status of an order.", func(_ context.Context, in struct {
		OrderID string `json:"order_id"`
	}) (string, error) {
		return "shipped", nil
	})
	run := func(text string) (*followedRun, <-chan struct{}) {
		out, done := &followedRun{}, make(chan struct{})
		wg.Go(func() {
			defer close(done)
			*out = runFollowed(ctx, c, &client.SessionRequest{Agent: client.AgentRef{Inline: &client.Agent{Name: "a"}}, Messages: client.Text(text)}, tool)
		})
		return out, done
	}
	waitAsked := func() string {
		t.Helper()
		select {
		case p := <-asked:
			return p
		case <-ctx.Done():
			t.Fatal("the model was never asked for a poison session")
			return ""
		}
	}

	// Both poison sessions start running; the process dies under them.
	srv := start()
	corrupt, corruptEnded := run("Check poison-corrupt.")
	crash, crashed := run("Check poison-crash.")
	// The model's malformed arguments made hrns serve panic and exit
	// (issue 12): the session now completes beside the poison ones.
	args, _ := run("Check poison-args.")
	healthy := []*followedRun{}
	h, _ := run("hello 0")
	healthy = append(healthy, h)
	got := map[string]bool{waitAsked(): true}
	got[waitAsked()] = true
	if !got["poison-corrupt"] || !got["poison-crash"] {
		t.Fatalf("the model was asked for %v, want both poison sessions", got)
	}
	kill(srv)
	kills := 1

	// The first one's checkpoint is corrupted in the file.
	corruptState(t, db, "poison-corrupt")

	// Restart until the server gives up on the other one; each time, a
	// healthy session is created along with it.
	for i := 1; ; i++ {
		srv = start()
		h, _ := run(fmt.Sprintf("hello %d", i))
		healthy = append(healthy, h)
		select {
		case p := <-asked:
			if p == "poison-corrupt" {
				t.Fatal("the session whose state is corrupt was run")
			}
			if i == 1 {
				// The corrupt one fails as soon as it is claimed, with
				// the other: see it fail before the crash.
				select {
				case <-corruptEnded:
				case <-ctx.Done():
					t.Fatal("the session whose state is corrupt never ended")
				}
			}
			kill(srv)
			if kills++; kills > 5 {
				t.Fatalf("killed %d times by the poison session: a crash loop", kills)
			}
			continue
		case <-crashed:
		case <-ctx.Done():
			t.Fatal("the poison session never ended")
		}
		break
	}
	if kills != 3 {
		t.Errorf("the poison session was tried %d times, want 3 (Options.MaxAttempts)", kills)
	}
	t.Logf("the poison session took the process down %d times before it was given up", kills)
	// The process that gave up is up and runs sessions.
	if srv.ProcessState != nil {
		t.Fatalf("hrns serve exited: %v", srv.ProcessState)
	}
	h, hdone := run("hello after")
	healthy = append(healthy, h)
	<-hdone

	// After a restart, neither poison session runs again.
	srv.Process.Signal(syscall.SIGTERM)
	if err := srv.Wait(); err != nil {
		t.Errorf("hrns serve after SIGTERM: %v", err)
	}
	srv = start()
	h, hdone = run("hello after restart")
	healthy = append(healthy, h)
	<-hdone
	wg.Wait()
	select {
	case p := <-asked:
		t.Errorf("%s was run again after the restart", p)
	default:
	}

	for _, p := range []struct {
		name string
		run  *followedRun
		want string
	}{
		{"corrupt", corrupt, "corrupt state"},
		{"crash", crash, "failed 3 times in a row"},
	} {
		o := p.run
		if o.err != nil {
			t.Errorf("%s session: %v", p.name, o.err)
			continue
		}
		if o.res.Status != session.StatusFailed || o.res.ErrorCode != session.CodeInternal || !strings.Contains(o.res.Error, p.want) {
			t.Errorf("%s session ended %s (%s: %q), want failed (internal: %q)", p.name, o.res.Status, o.res.ErrorCode, o.res.Error, p.want)
		}
		last := o.followed[len(o.followed)-1]
		var d struct{ Error string }
		json.Unmarshal(last.Data, &d)
		if last.Type != session.EventAgentError || d.Error != o.res.Error {
			t.Errorf("%s session's last event: %s %s, want an AgentErrorEvent with %q", p.name, last.Type, last.Data, o.res.Error)
		}
		// Read again from the restarted server: still failed, with the
		// log its follower read.
		var history []session.Event
		for e, err := range c.Session(o.res.SessionID).Stream(ctx) {
			if err != nil {
				t.Fatal(err)
			}
			history = append(history, e)
		}
		if diff := cmp.Diff(o.followed, history); diff != "" {
			t.Errorf("%s session: events read across the crashes differ from the log (-followed +log):\n%s", p.name, diff)
		}
		st, err := c.Session(o.res.SessionID).Status(ctx)
		if err != nil || st.Status != session.StatusFailed {
			t.Errorf("%s session after the restart: %+v, %v", p.name, st, err)
		}
	}
	// The arguments are carried as written (llm.Arguments): the model
	// reads what was wrong and the session completes.
	if o := args; o.err != nil || o.res.Status != session.StatusCompleted {
		t.Errorf("session with malformed arguments: %+v, %v; want completed", o.res, o.err)
	}
	for i, o := range healthy {
		if o.err != nil || o.res.Status != session.StatusCompleted || o.res.Answer != "fine" {
			t.Errorf("healthy session %d: %+v, %v; want completed with \"fine\"", i, o.res, o.err)
		}
	}
	if l := logs.String(); !strings.Contains(l, crash.res.SessionID) || !strings.Contains(l, "giving up on a session") {
		t.Errorf("the log does not say which session was given up")
	}
	srv.Process.Signal(syscall.SIGTERM)
	if err := srv.Wait(); err != nil {
		t.Errorf("hrns serve after SIGTERM: %v", err)
	}
}

// corruptState cuts in half, in the database file of a stopped server,
// the stored state of the session whose first message mentions what.
func corruptState(t *testing.T, path, what string) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	res, err := db.Exec(`UPDATE sessions SET state = substr(state, 1, length(state) / 2) WHERE first_message LIKE ? AND runnable = 1`, "%"+what+"%")
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("corrupted %d running sessions mentioning %q, want 1", n, what)
	}
}
