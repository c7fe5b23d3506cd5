package server_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/session"
)

// TestUIBrowserCompaction: a session compacted while its page is open
// (the model refuses a request as too long, with OpenAI's own error body;
// the run compacts and sends it again) shows the compaction as a line of
// its trajectory, live over the stream and again after a reload.
func TestUIBrowserCompaction(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "openai", "testdata", "context_length.http"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(raw)), nil)
	if err != nil {
		t.Fatal(err)
	}
	tooLong, _ := io.ReadAll(resp.Body)
	e := newUIEnv(t,
		calls(openaitest.ToolCall("call_1", "get_order_status", `{"order_id":"4241"}`)),
		calls(openaitest.ToolCall("call_2", "get_order_status", `{"order_id":"4242"}`)),
		calls(openaitest.ToolCall("call_3", "get_order_status", `{"order_id":"4243"}`)),
		openaitest.Reply{Status: http.StatusBadRequest, Body: string(tooLong)},
		// Dropping the oldest result is not enough: the turns before
		// the last two are summarised (a request without tools).
		openaitest.Reply{Text: "Orders 4241 and 4242 shipped on time."},
		openaitest.Reply{Text: "all three shipped"},
	)
	br := newUIBrowser(t)
	br.login(e)
	id := e.create(keyAlice, orderAgent)
	f := e.follow(keyAlice, id)
	br.step("open the session",
		eval(`location.hash = '#/s/`+id+`'`, nil),
		chromedp.WaitVisible(chromedp.CSS(`.client-tool[data-call="call_1"]`)),
	)
	path := "/api/v2/sessions/" + id + "/tool_results"
	long := strings.Repeat("shipped on time; ", 100)
	for i := 1; i <= 3; i++ {
		f.until(func(c *changes) bool {
			p := f.pending()
			return c.Status == session.StatusAwaitingToolResults && len(p) == 1 && p[0].ID == fmt.Sprintf("call_%d", i)
		})
		e.expect(e.do("POST", path, keyAlice, fmt.Sprintf(`{"kind":"tool_result","tool_req":{"tool_name":"get_order_status","id":"call_%d"},"result":%q}`, i, long)), http.StatusAccepted)
	}
	f.status(session.StatusCompleted)
	// The summary's tokens are the session's model's.
	if c := f.last; len(c.Metrics.CostPerModel) != 1 || c.Metrics.CostPerModel[0].Name != "test-model" {
		t.Errorf("metrics %+v", c.Metrics)
	}
	var live, reloaded string
	sel := chromedp.CSS(`.ev[data-type="ContextCompactedEvent"]`)
	br.step("the compaction shows live",
		chromedp.WaitVisible(chromedp.CSS(`.ev.answer_event`)),
		chromedp.WaitVisible(sel),
		eval(`document.querySelector('.ev[data-type="ContextCompactedEvent"]').textContent`, &live),
	)
	br.step("and after a reload",
		chromedp.Reload(),
		chromedp.WaitVisible(chromedp.CSS(`.ev.answer_event`)),
		chromedp.WaitVisible(sel),
		eval(`document.querySelector('.ev[data-type="ContextCompactedEvent"]').textContent`, &reloaded),
	)
	for _, got := range []string{live, reloaded} {
		if !strings.HasPrefix(got, "context compacted by trim+summarize: 8 → 7 messages") || !strings.Contains(got, "the model refused the request as too long, and it was sent again") {
			t.Errorf("compaction line %q", got)
		}
	}
}
