package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/store/postgres/postgrestest"
)

// TestServeReplicasBrowser: two replicas of hrns serve on one PostgreSQL
// database and one shared --browser-profiles directory (as docs/browser.md
// says a session's profile follows it across replicas). A session's run
// on one replica sets a cookie in its browser and parks for a client-side
// tool's result; the result, posted at once to the other replica, claims
// the session there, whose browser starts on the same profile while the
// first replica may still be closing its own: it waits for that browser's
// lock, then finds the cookie. Then the other way round, and on one
// replica twice.
func TestServeReplicasBrowser(t *testing.T) {
	needChromium(t)
	if testing.Short() {
		t.Skip("builds and runs two hrns serve processes")
	}
	dsn := postgrestest.DSN(t)
	site := newCookieSite(t)
	tool := func(id, name, args string) openaitest.Reply {
		return openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall(id, name, args)}}
	}
	answer := openaitest.Reply{Func: func(body []byte) openaitest.Reply {
		all := cookiesRE.FindAllSubmatch(body, -1)
		if all == nil {
			return openaitest.Reply{Text: "no page"}
		}
		return openaitest.Reply{Text: "cookies: " + string(all[len(all)-1][1])}
	}}
	routes := [][2]int{{0, 1}, {1, 0}, {0, 0}} // the replica a session is created on, the one its result is posted to
	var replies []openaitest.Reply
	for range routes {
		replies = append(replies,
			tool("call_set", "browser_navigate", fmt.Sprintf(`{"url":%q}`, site.URL+"/set")),
			tool("call_ask", "confirm", `{"question":"Go on?"}`),
			tool("call_check", "browser_navigate", fmt.Sprintf(`{"url":%q}`, site.URL+"/check")),
			answer)
	}
	model := openaitest.NewServer(replies...)
	defer model.Close()

	const key = "sk-replicas-browser"
	profiles, home := t.TempDir(), t.TempDir()
	var urls []string
	var logs []*syncBuffer
	for range 2 {
		addr := freeAddr(t)
		lb := &syncBuffer{}
		cmd := startServeProcess(t, addr, []string{"--db", dsn, "--model", "test-model", "--workers", "2",
			"--browser-allow", site.Listener.Addr().String(), "--browser-profiles", profiles},
			[]string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "XDG_CONFIG_HOME=" + home, "OPENAI_BASE_URL=" + model.URL(),
				"OPENAI_API_KEY=test", "HRNS_LEASE_TTL=" + replicaLeaseTTL, "HRNS_API_KEYS=" + key}, lb, lb.String)
		t.Cleanup(func() {
			cmd.Process.Signal(syscall.SIGTERM)
			cmd.Wait()
		})
		urls, logs = append(urls, "http://"+addr), append(logs, lb)
	}
	show := func() string { return "replica 0:\n" + logs[0].String() + "\nreplica 1:\n" + logs[1].String() }
	for i, r := range routes {
		code, b := api(t, "POST", urls[r[0]]+"/api/v2/sessions", key, `{"agent":{"name":"visitor","environments":[{"kind":"web","headless":true}],
			"tools":[{"name":"confirm","description":"Asks the user.","input_schema":{"type":"object","properties":{"question":{"type":"string"}}}}]},
			"messages":"Check the cookies."}`)
		if code != http.StatusCreated {
			t.Fatalf("create: %d %s", code, b)
		}
		var sess struct{ ID string }
		json.Unmarshal(b, &sess)
		id := sess.ID
		if st := waitForStatus(t, urls[r[1]], key, id, "awaiting_tool_results", "failed", "completed"); st != "awaiting_tool_results" {
			t.Fatalf("session %d: %s\n%s", i, st, show())
		}
		code, b = api(t, "POST", urls[r[1]]+"/api/v2/sessions/"+id+"/tool_results", key,
			`{"kind":"tool_result","tool_req":{"tool_name":"confirm","args":{"question":"Go on?"},"id":"call_ask"},"result":"yes"}`)
		if code/100 != 2 {
			t.Fatalf("tool result: %d %s", code, b)
		}
		if st := waitForStatus(t, urls[r[1]], key, id, "completed", "failed"); st != "completed" {
			t.Fatalf("session %d: %s\n%s", i, st, show())
		}
		_, b = api(t, "GET", urls[r[1]]+"/api/v2/sessions/"+id, key, "")
		if !strings.Contains(string(b), "cookies: pref=dark42") {
			_, evs := api(t, "GET", urls[r[1]]+"/api/v2/sessions/"+id+"/events?size=200", key, "")
			t.Logf("events: %s", evs)
			t.Fatalf("session %d (created on replica %d, resumed through %d): %s\n%s", i, r[0], r[1], b, show())
		}
	}
	// The ended sessions' profiles are removed where they ended.
	left, _ := os.ReadDir(profiles)
	for _, e := range left {
		if !strings.HasPrefix(e.Name(), ".") {
			t.Logf("left in the shared profiles: %s", filepath.Join(profiles, e.Name()))
		}
	}
}
