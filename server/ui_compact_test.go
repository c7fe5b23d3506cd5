package server_test

import (
	"bufio"
	"bytes"
	"encoding/json"
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

// TestUIBrowserReusedCallID: a call the person approved on the page
// (call_1), then a compaction, then a new call of the model that reuses
// the id call_1: the page, left open all along, shows the new call's
// approval card (its arguments, not the old call's), with Approve held
// back as for any new card, and approving it runs it. A call's id is the
// model's (untrusted): the page keys a decided call by its wait (the
// ActiveStateChangeEvent from which it waits), not by the id alone.
// Before, the page kept the decided ids and hid every later call with
// one of them until a reload: the person never saw that a call waited.
func TestUIBrowserReusedCallID(t *testing.T) {
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
		calls(openaitest.ToolCall("call_1", "deploy", `{"service":"api"}`)),
		calls(openaitest.ToolCall("call_2", "deploy", `{"service":"web"}`)),
		calls(openaitest.ToolCall("call_3", "deploy", `{"service":"jobs"}`)),
		openaitest.Reply{Status: http.StatusBadRequest, Body: string(tooLong)},
		// The turns before the last two are summarised, in two
		// requests without tools.
		openaitest.Reply{Text: "api was deployed."},
		openaitest.Reply{Text: "api and web were deployed."},
		calls(openaitest.ToolCall("call_1", "deploy", `{"service":"db"}`)),
		openaitest.Reply{Text: "all deployed"},
	)
	br := newUIBrowser(t)
	br.login(e)
	id := e.create(keyAlice, `{"agent":"ops","messages":"deploy everything"}`)
	approve := chromedp.CSS(`.approval[data-call="call_1"] button.approve`)
	br.step("approve call_1 on the page",
		eval(`location.hash = '#/s/`+id+`'`, nil),
		chromedp.WaitEnabled(approve),
		chromedp.Click(approve),
		chromedp.WaitNotPresent(chromedp.CSS(`.approval[data-call="call_1"]`)),
	)
	f := e.follow(keyAlice, id)
	for _, call := range []string{"call_2", "call_3"} {
		f.until(func(c *changes) bool {
			return c.Status == session.StatusAwaitingToolResults && len(f.approvals()) == 1 && f.approvals()[0].ID == call
		})
		e.expect(e.do("POST", "/api/v2/sessions/"+id+"/approvals", keyAlice, fmt.Sprintf(`{"id":%q,"approved":true}`, call)), http.StatusAccepted)
	}
	f.until(func(c *changes) bool {
		as := f.approvals()
		return c.Status == session.StatusAwaitingToolResults && len(as) == 1 && as[0].ID == "call_1" && strings.Contains(string(as[0].Args), "db")
	})
	var card string
	br.step("the new call_1 shows, after the compaction, without a reload",
		chromedp.WaitVisible(chromedp.CSS(`.ev[data-type="ContextCompactedEvent"]`)),
		chromedp.WaitVisible(approve),
		eval(`document.querySelector('.approval[data-call="call_1"]').textContent`, &card),
	)
	if !strings.Contains(card, "db") || strings.Contains(card, "api") {
		t.Errorf("the card of the new call_1: %q", card)
	}
	br.step("approving it runs it",
		chromedp.WaitEnabled(approve),
		chromedp.Click(approve),
		chromedp.WaitNotPresent(chromedp.CSS(`.approval[data-call="call_1"]`)),
	)
	f.status(session.StatusCompleted)
}

// approvals returns the approvals waiting in the latest
// ActiveStateChangeEvent.
func (f *follower) approvals() []session.ToolRequest {
	for i := len(f.events) - 1; i >= 0; i-- {
		if f.events[i].Type == session.EventActiveState {
			var as session.ActiveState
			json.Unmarshal(f.events[i].Data, &as)
			return as.PendingApprovals
		}
	}
	return nil
}
