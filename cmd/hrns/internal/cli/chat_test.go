package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hrns-dev/hrns/cmd/hrns/internal/tui"
	"github.com/hrns-dev/hrns/openai/openaitest"
)

func TestChatNeedsTerminal(t *testing.T) {
	for _, args := range [][]string{{"chat"}, {}} {
		var errOut bytes.Buffer
		code := Run(t.Context(), args, &IO{In: strings.NewReader(""), Out: &bytes.Buffer{}, Err: &errOut, Getenv: func(string) string { return "" }})
		if code != ExitUsage {
			t.Errorf("%q: exit %d, want %d", args, code, ExitUsage)
		}
		if len(args) == 1 && !strings.Contains(errOut.String(), "needs a terminal") {
			t.Errorf("%q: %s", args, errOut.String())
		}
	}
}

func TestChatUsageErrors(t *testing.T) {
	term := func() bool { return true }
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"chat", "hello"}, "chat takes no prompt"},
		{[]string{"chat", "--json"}, "--json, --output-schema and --timeout are for hrns run"},
		{[]string{"chat", "--continue", "--resume"}, "cannot be used together"},
	} {
		var errOut bytes.Buffer
		code := Run(t.Context(), tt.args, &IO{In: strings.NewReader(""), Out: &bytes.Buffer{}, Err: &errOut, Interactive: term, OutTerminal: term, Getenv: func(string) string { return "" }})
		if code != ExitUsage || !strings.Contains(errOut.String(), tt.want) {
			t.Errorf("%q: exit %d, %s", tt.args, code, errOut.String())
		}
	}
}

// TestRunContinue: a run is saved, and run --continue sends it again
// before the follow-up.
func TestRunContinue(t *testing.T) {
	srv := openaitest.NewServer(openaitest.Reply{Text: "Paris."}, openaitest.Reply{Text: "About 2 million."})
	defer srv.Close()
	home, work := t.TempDir(), t.TempDir()
	env := func(k string) string { return map[string]string{"HOME": home}[k] }
	run := func(args ...string) (int, string) {
		var out, errOut bytes.Buffer
		args = append([]string{"run", "--base-url", srv.URL(), "--model", "m", "--tools", "none", "--no-skills", "--workdir", work}, args...)
		code := Run(t.Context(), args, &IO{In: strings.NewReader(""), Out: &out, Err: &errOut, Getenv: env})
		return code, out.String() + errOut.String()
	}
	if code, out := run("--continue", "hello?"); code != ExitUsage || !strings.Contains(out, "no saved conversation") {
		t.Fatalf("--continue with nothing saved: %d %s", code, out)
	}
	if code, out := run("capital of France?"); code != ExitOK {
		t.Fatalf("%d %s", code, out)
	}
	if code, out := run("--continue", "how many people?"); code != ExitOK || !strings.Contains(out, "About 2 million.") {
		t.Fatalf("%d %s", code, out)
	}
	body := string(srv.Requests()[1].Body)
	for _, want := range []string{"capital of France?", "Paris.", "how many people?"} {
		if !strings.Contains(body, want) {
			t.Errorf("the follow-up lacks %q: %s", want, body)
		}
	}
}

// TestRunOpensStoreAfterRun: a run that does not continue opens the store
// of conversations only to save it, after the model has answered, so that
// its first request waits for no database; the run is still saved.
func TestRunOpensStoreAfterRun(t *testing.T) {
	home, work := t.TempDir(), t.TempDir()
	db := tui.DefaultStorePath(func(k string) string { return map[string]string{"HOME": home}[k] })
	var existed atomic.Bool
	srv := openaitest.NewServer(openaitest.Reply{Func: func([]byte) openaitest.Reply {
		_, err := os.Stat(db)
		existed.Store(err == nil)
		return openaitest.Reply{Text: "Paris."}
	}}, openaitest.Reply{Text: "About 2 million."})
	defer srv.Close()
	env := func(k string) string { return map[string]string{"HOME": home}[k] }
	run := func(args ...string) (int, string) {
		var out, errOut bytes.Buffer
		args = append([]string{"run", "--base-url", srv.URL(), "--model", "m", "--tools", "none", "--no-skills", "--workdir", work}, args...)
		code := Run(t.Context(), args, &IO{In: strings.NewReader(""), Out: &out, Err: &errOut, Getenv: env})
		return code, out.String() + errOut.String()
	}
	if code, out := run("capital of France?"); code != ExitOK {
		t.Fatalf("%d %s", code, out)
	}
	if existed.Load() {
		t.Errorf("%s existed when the model was asked", db)
	}
	if _, err := os.Stat(db); err != nil {
		t.Fatalf("the run was not saved: %v", err)
	}
	if code, out := run("--continue", "how many people?"); code != ExitOK || !strings.Contains(out, "About 2 million.") {
		t.Fatalf("%d %s", code, out)
	}
	if body := string(srv.Requests()[1].Body); !strings.Contains(body, "Paris.") {
		t.Errorf("the follow-up lacks the saved answer: %s", body)
	}
}

// TestRunSaysWhenNotSaved: a run whose store of conversations cannot be
// opened (here its directory cannot be made: XDG_STATE_HOME is a file)
// prints its answer all the same, exits 0, and says on stderr that it was
// not saved and why; --json's end line then has no session_id.
func TestRunSaysWhenNotSaved(t *testing.T) {
	srv := openaitest.NewServer(openaitest.Reply{Text: "Paris."}, openaitest.Reply{Text: "Paris again."})
	defer srv.Close()
	state := filepath.Join(t.TempDir(), "state")
	if err := os.WriteFile(state, []byte("not a directory"), 0o600); err != nil {
		t.Fatal(err)
	}
	home, work := t.TempDir(), t.TempDir()
	env := func(k string) string { return map[string]string{"HOME": home, "XDG_STATE_HOME": state}[k] }
	for _, json := range []bool{false, true} {
		var out, errOut bytes.Buffer
		args := []string{"run", "--base-url", srv.URL(), "--model", "m", "--tools", "none", "--no-skills", "--workdir", work}
		if json {
			args = append(args, "--json")
		}
		code := Run(t.Context(), append(args, "capital of France?"), &IO{In: strings.NewReader(""), Out: &out, Err: &errOut, Getenv: env})
		if code != ExitOK || !strings.Contains(out.String(), "Paris") {
			t.Fatalf("json %v: exit %d, answer lost: %s %s", json, code, out.String(), errOut.String())
		}
		if e := errOut.String(); !strings.Contains(e, "not saved") || !strings.Contains(e, "conversation store") {
			t.Errorf("json %v: the failure is not said: %q", json, e)
		}
		if json && strings.Contains(out.String(), "session_id") {
			t.Errorf("an unsaved run names a session: %s", out.String())
		}
	}
}
