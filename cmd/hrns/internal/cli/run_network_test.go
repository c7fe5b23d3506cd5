package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/sandbox"
)

// TestRunCommandNetworkPublic: hrns run --command-network public gives
// commands the public internet through the proxy alone, as hrns serve
// does for agents given the network: a loopback server is out of reach
// unless --command-network-allow lists it; --command-network all keeps the
// whole network of the user's machine, as before.
func TestRunCommandNetworkPublic(t *testing.T) {
	if _, err := sandbox.Supported(); err != nil {
		t.Skipf("commands are not sandboxed here: %v", err)
	}
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	script := fmt.Sprintf(`echo LOOP=$(curl -s --noproxy '' -o /dev/null -w '%%{http_code}' --max-time 20 -x "${HTTP_PROXY:-}" http://127.0.0.1:%s/)`, port)
	args, _ := json.Marshal(map[string]string{"command": script})
	for _, tc := range []struct {
		name     string
		flags    []string
		want     string
		requests int32
	}{
		{"public", []string{"--command-network", "public"}, "LOOP=403", 0},
		{"public, allowed", []string{"--command-network", "public", "--command-network-allow", "127.0.0.1:" + port}, "LOOP=200", 1},
		{"all", nil, "LOOP=200", 1},
		{"none", []string{"--command-network", "none"}, "LOOP=000", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			requests.Store(0)
			model := openaitest.NewServer(
				openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall("c1", "run_command", string(args))}},
				openaitest.Reply{Text: "Done."},
			)
			defer model.Close()
			var out, errOut bytes.Buffer
			stdio := &IO{Out: &out, Err: &errOut, Getenv: func(string) string { return "" }}
			argv := append([]string{"run", "--base-url", model.URL(), "--model", "m", "--tools", "run_command", "--yes", "--no-skills", "--workdir", t.TempDir()}, tc.flags...)
			if code := Run(t.Context(), append(argv, "probe"), stdio); code != ExitOK {
				t.Fatalf("exit %d\n%s", code, errOut.String())
			}
			reqs := model.Requests()
			if len(reqs) != 2 || !strings.Contains(string(reqs[1].Body), tc.want) || requests.Load() != tc.requests {
				t.Errorf("want %s and %d requests at the server (got %d); the model read:\n%s", tc.want, tc.requests, requests.Load(), reqs[len(reqs)-1].Body)
			}
		})
	}
	var errOut bytes.Buffer
	if code := Run(t.Context(), []string{"run", "--command-network", "some", "x"}, &IO{Out: io.Discard, Err: &errOut, Getenv: func(string) string { return "" }}); code == ExitOK || !strings.Contains(errOut.String(), "want all, public or none") {
		t.Errorf("--command-network some: exit %d, %s", code, errOut.String())
	}
}
