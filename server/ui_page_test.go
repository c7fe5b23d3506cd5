package server_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/hrns-dev/hrns/browser"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/openai"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/server"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store/sqlite"
)

// TestUIBrowserStartSession starts a session from the page's form, in a
// headless Chromium: an agent of the server, a message, an image (which
// the model sees) and a CSV file (written into the session's workspace
// before the agent starts, and named in the message); then a follow-up
// with a file from the session page. Too many files are refused before
// anything is sent, and the form keeps the message; so is an empty
// image (which the API would refuse).
func TestUIBrowserStartSession(t *testing.T) {
	e := newUIEnv(t,
		openaitest.Reply{Text: "I see the chart and orders.csv"},
		openaitest.Reply{Text: "read more.txt too"},
	)
	dir := t.TempDir()
	png := filepath.Join(dir, "chart.png")
	csv := filepath.Join(dir, "orders.csv")
	more := filepath.Join(dir, "more.txt")
	os.WriteFile(png, chartPNG(t), 0o644)
	os.WriteFile(csv, []byte("id,status\n4242,shipped\n"), 0o644)
	os.WriteFile(more, []byte("more"), 0o644)
	var many []string
	for i := range 21 {
		f := filepath.Join(dir, fmt.Sprintf("f%d.txt", i))
		os.WriteFile(f, []byte("x"), 0o644)
		many = append(many, f)
	}

	b := newUIBrowser(t)
	b.login(e)
	var refused string
	b.step("too many files",
		chromedp.Poll[chromedp.Void](`document.querySelector('#new-agent option[value="ops"]') !== null`),
		chromedp.SetValue(chromedp.CSS(`#new-agent`), "ops"),
		chromedp.SendKeys(chromedp.CSS(`#new-message`), "look at these"),
		chromedp.SetUploadFiles(chromedp.CSS(`#new-files`), many),
		chromedp.Click(chromedp.CSS(`#new-start`)),
		chromedp.Poll[chromedp.Void](`document.querySelector('#new-error').textContent !== ''`),
		eval(`document.querySelector('#new-error').textContent + ' / ' + document.querySelector('#new-message').value`, &refused),
	)
	if refused != "Not started: at most 20 files at once (21 chosen) / look at these" {
		t.Errorf("too many files: %q", refused)
	}
	empty := filepath.Join(dir, "empty.png")
	os.WriteFile(empty, nil, 0o644)
	b.step("an empty image",
		chromedp.SetUploadFiles(chromedp.CSS(`#new-files`), []string{csv, empty}),
		chromedp.Click(chromedp.CSS(`#new-start`)),
		chromedp.Poll[chromedp.Void](`document.querySelector('#new-error').textContent.includes('empty')`),
		eval(`document.querySelector('#new-error').textContent + ' / ' + document.querySelector('#new-message').value`, &refused),
	)
	if refused != "Not started: empty.png is empty: there is nothing in it to attach / look at these" {
		t.Errorf("an empty image: %q", refused)
	}
	var list struct {
		Total int `json:"total"`
	}
	e.expect(e.do("GET", "/api/v2/sessions", keyAlice, nil), http.StatusOK).json(&list)
	if list.Total != 0 {
		t.Errorf("a refused form made %d sessions", list.Total)
	}

	var hash, answer string
	b.step("start",
		chromedp.SetUploadFiles(chromedp.CSS(`#new-files`), []string{png, csv}),
		chromedp.Click(chromedp.CSS(`#new-start`)),
		chromedp.WaitVisible(chromedp.CSS(`#status [data-state="completed"]`)),
		chromedp.WaitVisible(chromedp.CSS(`.ev.answer_event`)),
		eval(`location.hash`, &hash),
		eval(`document.querySelector('.ev.answer_event .answer').textContent`, &answer),
	)
	id := strings.TrimPrefix(hash, "#/s/")
	if id == hash || !strings.Contains(answer, "I see the chart and orders.csv") {
		t.Fatalf("after Start: %q, answer %q", hash, answer)
	}
	reqs := e.model.Requests()
	first := string(reqs[0].Body)
	if !strings.Contains(first, `look at these\n\n(Attached in the workspace: orders.csv)`) || !strings.Contains(first, "data:image/png;base64,"+base64.StdEncoding.EncodeToString(chartPNG(t))) {
		t.Errorf("the model's first request:\n%s", first)
	}
	var file struct {
		Content string `json:"content_base64"`
	}
	e.expect(e.do("POST", "/api/v2/sessions/"+id+"/files/read_file", keyAlice, `{"path":"orders.csv"}`), http.StatusOK).json(&file)
	if got, _ := base64.StdEncoding.DecodeString(file.Content); string(got) != "id,status\n4242,shipped\n" {
		t.Errorf("orders.csv in the workspace: %q", got)
	}

	// A follow-up with a file, from the same page.
	b.step("follow-up",
		chromedp.SendKeys(chromedp.CSS(`#message`), "and this"),
		chromedp.SetUploadFiles(chromedp.CSS(`#message-files`), []string{more}),
		chromedp.Click(chromedp.CSS(`#btn-send`)),
		chromedp.Poll[chromedp.Void](`[...document.querySelectorAll('.ev.answer_event')].length === 2`),
		chromedp.WaitVisible(chromedp.CSS(`#status [data-state="completed"]`)),
	)
	reqs = e.model.Requests()
	if last := string(reqs[len(reqs)-1].Body); !strings.Contains(last, `and this\n\n(Attached in the workspace: more.txt)`) {
		t.Errorf("the follow-up's request:\n%s", last)
	}
	e.expect(e.do("POST", "/api/v2/sessions/"+id+"/files/read_file", keyAlice, `{"path":"more.txt"}`), http.StatusOK)
}

// hostileMarkdown is an answer in Markdown whose HTML, event handlers
// and javascript:, data: and mixed-case links must stay inert.
const hostileMarkdown = "# Report\n\n**bold** and _em_ and `<b>code</b>` and snake_case_name\n\n" +
	`<script>window.pwned=1</script><img src=x onerror="window.pwned=2">` + "\n\n" +
	"[click me](javascript:window.pwned=3) [also](JaVaScRiPt:alert(1)) [data](data:text/html,<script>alert(1)</script>) [ok](https://example.com/a?b=1)\n\n" +
	"![pic](https://evil.example/p.png)\n\n" +
	"[https://github.com/hrns-dev/hrns](https://evil.example/clone)\n\n" +
	"- one\n- two with [x](vbscript:msgbox)\n\n" +
	"| a | b |\n|---|--:|\n| 1 | <i onmouseover=alert(1)>2</i> |\n\n" +
	"```html\n<iframe src=javascript:alert(1)></iframe>\n```\n"

// TestUIBrowserConversation reads a session as a conversation, in a
// headless Chromium: the steps labelled in words with a time each, the
// tool call and its result folded to a line that opens, the answer
// rendered as Markdown once, with hostile HTML and links inert; and the
// controls enabled only when the session's state allows them.
func TestUIBrowserConversation(t *testing.T) {
	e := newUIEnv(t,
		openaitest.Reply{Text: "I will *deploy* it.", ToolCalls: []llm.ToolCall{openaitest.ToolCall("call_1", "deploy", `{"service":"api"}`)}},
		openaitest.Reply{Text: hostileMarkdown},
	)
	b := newUIBrowser(t)
	b.login(e)
	id := e.create(keyAlice, `{"agent":"ops","messages":"deploy **api** <img src=x onerror=window.pwned=4>"}`)
	buttons := func(want string) chromedp.Action[chromedp.Void] {
		return chromedp.Poll[chromedp.Void](`['pause','resume','force-answer','cancel','send','share'].map(b => document.querySelector('#btn-' + b).disabled ? '-' : b).join(' ') === '` + want + `'`)
	}
	var scripts int
	b.step("waiting for approval",
		eval(`location.hash = '#/s/`+id+`'`, nil),
		chromedp.WaitVisible(chromedp.CSS(`.approval[data-call="call_1"] button.approve`)),
		eval(`document.scripts.length`, &scripts),
		buttons("pause - force-answer cancel send share"),
		chromedp.Click(chromedp.CSS(`#btn-pause`)),
		chromedp.WaitVisible(chromedp.CSS(`#status [data-state="paused"]`)),
		buttons("- resume force-answer cancel send share"),
		chromedp.Click(chromedp.CSS(`#btn-resume`)),
		chromedp.WaitVisible(chromedp.CSS(`#status [data-state="awaiting_tool_results"]`)),
		buttons("pause - force-answer cancel send share"),
	)
	var call struct {
		Summary string `json:"summary"`
		Hidden  bool   `json:"hidden"`
	}
	b.step("a call folded to a line",
		eval(`(() => { const d = document.querySelector('.ev.policy_event details.call'); return {summary: d.querySelector('summary').textContent, hidden: !d.querySelector('pre.args').checkVisibility()}; })()`, &call),
		chromedp.Click(chromedp.CSS(`.ev.policy_event details.call summary`)),
		chromedp.Poll[chromedp.Void](`document.querySelector('.ev.policy_event details.call pre.args').checkVisibility()`),
	)
	if call.Summary != `deploy {"service":"api"}` || !call.Hidden {
		t.Errorf("the folded call: %+v", call)
	}
	var got struct {
		Pwned     string   `json:"pwned"`
		Scripts   int      `json:"scripts"`
		Bad       []string `json:"bad"`
		Links     []string `json:"links"`
		Strong    string   `json:"strong"`
		Em        string   `json:"em"`
		Code      []string `json:"code"`
		Heading   string   `json:"heading"`
		Items     []string `json:"items"`
		Cells     []string `json:"cells"`
		Text      string   `json:"text"`
		Answers   int      `json:"answers"`
		Repeated  int      `json:"repeated"`
		Labels    []string `json:"labels"`
		Untimed   []string `json:"untimed"`
		Result    string   `json:"result"`
		ResultVis bool     `json:"resultVis"`
		Message   string   `json:"message"`
		MsgStrong string   `json:"msgStrong"`
	}
	b.step("answered",
		chromedp.WaitEnabled(chromedp.CSS(`.approval[data-call="call_1"] button.approve`)), // enabled a moment after it shows
		chromedp.Click(chromedp.CSS(`.approval[data-call="call_1"] button.approve`)),
		chromedp.WaitVisible(chromedp.CSS(`.ev.answer_event`)),
		chromedp.WaitVisible(chromedp.CSS(`#status [data-state="completed"]`)),
		buttons("- - - - send share"),
		eval(`(() => {
			const a = document.querySelector('.ev.answer_event .answer');
			const bad = [];
			for (const n of document.querySelectorAll('#events *')) {
				if (['SCRIPT', 'IMG', 'IFRAME', 'I', 'B', 'OBJECT', 'EMBED', 'STYLE'].includes(n.tagName) && !n.closest('.observation_event')) bad.push(n.tagName);
				for (const at of n.attributes) if (/^on/i.test(at.name) || /^\s*(javascript|data|vbscript):/i.test(at.value)) bad.push(n.tagName + ' ' + at.name + '=' + at.value);
			}
			return {
				pwned: typeof window.pwned, scripts: document.scripts.length, bad,
				links: [...a.querySelectorAll('a')].map(l => l.getAttribute('href') + ' ' + l.rel + ' ' + l.target + ' ' + l.textContent),
				strong: a.querySelector('strong').textContent, em: a.querySelector('em').textContent,
				code: [...a.querySelectorAll('code')].map(c => c.textContent),
				heading: a.querySelector('h3').textContent,
				items: [...a.querySelectorAll('li')].map(l => l.textContent),
				cells: [...a.querySelectorAll('td')].map(l => l.textContent),
				text: a.textContent,
				answers: document.querySelectorAll('.ev.answer_event').length,
				repeated: [...document.querySelectorAll('#events .ev')].filter(n => !n.classList.contains('answer_event') && n.textContent.includes('Report')).length,
				labels: [...document.querySelectorAll('#events .ev')].map(n => (n.querySelector(':scope > .label .what, :scope > .what, :scope > details > summary .what') || n).textContent),
				untimed: [...document.querySelectorAll('#events .ev')].filter(n => !n.querySelector('time.at')).map(n => n.dataset.type),
				result: document.querySelector('.ev.tool_result details.fold summary').textContent,
				resultVis: document.querySelector('.ev.tool_result pre.result').checkVisibility(),
				message: document.querySelector('.ev.message_event .text').textContent,
				msgStrong: (document.querySelector('.ev.message_event strong') || {}).textContent || '',
			};
		})()`, &got),
	)
	if got.Pwned != "undefined" || got.Scripts != scripts || len(got.Bad) != 0 {
		t.Errorf("hostile Markdown ran or became elements: pwned %s, scripts %d (before %d), %q", got.Pwned, got.Scripts, scripts, got.Bad)
	}
	wantLinks := []string{
		"https://example.com/a?b=1 noopener noreferrer nofollow _blank ok",
		"https://evil.example/p.png noopener noreferrer nofollow _blank image: pic",
		"https://evil.example/clone noopener noreferrer nofollow _blank https://github.com/hrns-dev/hrns",
	}
	if strings.Join(got.Links, "\n") != strings.Join(wantLinks, "\n") {
		t.Errorf("links:\n%s", strings.Join(got.Links, "\n"))
	}
	// A link whose text names another address says where it leads.
	for _, s := range []string{`<script>window.pwned=1</script><img src=x onerror="window.pwned=2">`, "click me (javascript:window.pwned=3)", "also (JaVaScRiPt:alert(1))", "snake_case_name",
		"https://github.com/hrns-dev/hrns (https://evil.example/clone)", "ok (https://example.com/a?b=1)"} {
		if !strings.Contains(got.Text, s) {
			t.Errorf("the answer does not show %q as text:\n%s", s, got.Text)
		}
	}
	if got.Strong != "bold" || got.Em != "em" || strings.Join(got.Code, "|") != "<b>code</b>|<iframe src=javascript:alert(1)></iframe>" || got.Heading != "Report" ||
		strings.Join(got.Items, "|") != "one|two with x (vbscript:msgbox)" || strings.Join(got.Cells, "|") != "1|<i onmouseover=alert(1)>2</i>" {
		t.Errorf("Markdown rendered as %+v", got)
	}
	if got.Answers != 1 || got.Repeated != 0 {
		t.Errorf("the answer shows %d times, and %d more in other steps", got.Answers, got.Repeated)
	}
	for _, l := range got.Labels {
		if strings.Contains(l, "Event") || strings.Contains(l, "_") {
			t.Errorf("a step labelled %q, not in words (all: %q)", l, got.Labels)
		}
	}
	if len(got.Untimed) != 0 {
		t.Errorf("steps without a time: %q", got.Untimed)
	}
	if !strings.HasPrefix(got.Result, "Result of deploy <script>") || got.ResultVis {
		t.Errorf("the result is not folded to a line: %q (open %v)", got.Result, got.ResultVis)
	}
	if got.MsgStrong != "api" || !strings.Contains(got.Message, "<img src=x onerror=window.pwned=4>") {
		t.Errorf("the message: %q (strong %q)", got.Message, got.MsgStrong)
	}
	if shots := os.Getenv("HRNS_UI_SCREENSHOTS"); shots != "" {
		b.shot(filepath.Join(shots, "ui-conversation.png"))
	}
}

// setJSON replaces the text of the page's JSON editor.
func setJSON(v string) chromedp.Action[chromedp.Void] {
	b, _ := json.Marshal(v)
	return eval(`document.querySelector('#manage-json').value = `+string(b), nil)
}

// TestUIBrowserManage manages from the page, in a headless Chromium,
// what the API manages: agents (the server's read-only, one registered,
// edited and deleted), environments, skills, a webhook (its secret
// shown once, a ping, its delivery log) and a schedule (run by hand,
// its runs, paused); bad JSON and what the server refuses are said
// beside the editor, which keeps the text.
func TestUIBrowserManage(t *testing.T) {
	e := newUIEnv(t, openaitest.Reply{Text: "digest done"}, openaitest.Reply{Text: "ok"})
	var (
		mu       sync.Mutex
		received []string
	)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		received = append(received, string(body))
		mu.Unlock()
	}))
	t.Cleanup(receiver.Close)

	b := newUIBrowser(t)
	b.login(e)
	rows := func(want string) chromedp.Action[chromedp.Void] {
		return chromedp.Poll[chromedp.Void](`[...document.querySelectorAll('#manage-items tr')].map(r => r.dataset.name).join(',') === '` + want + `'`)
	}
	errorSays := func(s string) chromedp.Action[chromedp.Void] {
		return chromedp.Poll[chromedp.Void](`document.querySelector('#manage-edit .error').textContent.includes(` + strconvQuote(s) + `)`)
	}
	var readOnly string
	b.step("agents",
		chromedp.Click(chromedp.CSS(`#nav-manage`)),
		rows("coder,ops"),
		chromedp.Click(chromedp.CSS(`#manage-items tr[data-name="ops"] button.open`)),
		chromedp.WaitVisible(chromedp.CSS(`#manage-edit[data-name="ops"]`)),
		eval(`document.querySelector('#manage-edit').textContent`, &readOnly),
	)
	if !strings.Contains(readOnly, "read-only") || strings.Contains(readOnly, "Save") {
		t.Errorf("a server agent: %q", readOnly)
	}
	var kept string
	b.step("a new agent",
		chromedp.Click(chromedp.CSS(`#manage-new`)),
		chromedp.WaitVisible(chromedp.CSS(`#manage-json`)),
		setJSON(`{"name": "helper",`),
		chromedp.Click(chromedp.CSS(`#manage-edit button[type="submit"]`)),
		errorSays("Not JSON"),
		setJSON(`{"name": "Bad Name", "description": "d", "environments": []}`),
		chromedp.Click(chromedp.CSS(`#manage-edit button[type="submit"]`)),
		errorSays("name"),
		eval(`document.querySelector('#manage-json').value`, &kept),
		setJSON(`{"name": "helper", "description": "Helps.", "environments": []}`),
		chromedp.Click(chromedp.CSS(`#manage-edit button[type="submit"]`)),
		rows("coder,ops,helper"),
	)
	if !strings.Contains(kept, "Bad Name") {
		t.Errorf("the refused text was not kept: %q", kept)
	}
	b.step("edit the agent",
		chromedp.Click(chromedp.CSS(`#manage-items tr[data-name="helper"] button.open`)),
		chromedp.WaitVisible(chromedp.CSS(`#manage-edit[data-name="helper"] #manage-json`)),
		setJSON(`{"name": "helper", "description": "Helps more.", "environments": [], "model": "test-model"}`),
		chromedp.Click(chromedp.CSS(`#manage-edit button[type="submit"]`)),
		chromedp.Poll[chromedp.Void](`document.querySelector('#manage-items tr[data-name="helper"]').textContent.includes('Helps more.test-model')`),
	)
	var agent struct{ Description, Model string }
	e.expect(e.do("GET", "/api/v2/agents/helper", keyAlice, nil), http.StatusOK).json(&agent)
	if agent.Description != "Helps more." || agent.Model != "test-model" {
		t.Errorf("the agent after Save: %+v", agent)
	}
	b.step("delete the agent",
		eval(`document.querySelector('#manage-detail').replaceChildren()`, nil),
		chromedp.Click(chromedp.CSS(`#manage-items tr[data-name="helper"] button.open`)),
		chromedp.WaitVisible(chromedp.CSS(`#manage-edit[data-name="helper"] #manage-delete`)),
		chromedp.Click(chromedp.CSS(`#manage-delete`)),
		chromedp.Poll[chromedp.Void](`document.querySelector('#manage-delete').textContent.includes('Click again')`),
		chromedp.Click(chromedp.CSS(`#manage-delete`)),
		rows("coder,ops"),
	)
	e.expect(e.do("GET", "/api/v2/agents/helper", keyAlice, nil), http.StatusNotFound)

	b.step("environments and skills",
		chromedp.Click(chromedp.CSS(`#manage-tabs a[data-kind="environments"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#manage-new`)),
		// The server's read-only entry: the user's own desktop.
		chromedp.Poll[chromedp.Void](`document.querySelector('#manage-info').textContent.startsWith('1 ')`),
		rows("desktop"),
		chromedp.Click(chromedp.CSS(`#manage-new`)),
		setJSON(`{"id": "shop/checkout", "kind": "web", "start_url": "https://shop.example/"}`),
		chromedp.Click(chromedp.CSS(`#manage-edit button[type="submit"]`)),
		rows("desktop,shop/checkout"),
		chromedp.Poll[chromedp.Void](`document.querySelector('#manage-items tr[data-name="shop/checkout"]').textContent.includes('https://shop.example/')`),
		chromedp.Click(chromedp.CSS(`#manage-tabs a[data-kind="skills"]`)),
		chromedp.Poll[chromedp.Void](`document.querySelector('#manage-info').textContent.startsWith('0 skills')`),
		chromedp.Click(chromedp.CSS(`#manage-new`)),
		setJSON(`{"name": "order-lookup", "description": "Looking orders up.", "body": "Read the API."}`),
		chromedp.Click(chromedp.CSS(`#manage-edit button[type="submit"]`)),
		rows("order-lookup"),
	)

	// A webhook: created with its secret shown once, pinged, and its
	// delivery log after a session's changes.
	var secret string
	b.step("a webhook",
		chromedp.Click(chromedp.CSS(`#manage-tabs a[data-kind="webhooks"]`)),
		chromedp.Poll[chromedp.Void](`document.querySelector('#manage-info').textContent.startsWith('0 webhooks')`),
		chromedp.Click(chromedp.CSS(`#manage-new`)),
		setJSON(`{"url": "`+receiver.URL+`/hook", "enabled_events": ["*"]}`),
		chromedp.Click(chromedp.CSS(`#manage-edit button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#manage-secret pre`)),
		eval(`document.querySelector('#manage-secret pre').textContent`, &secret),
		chromedp.Poll[chromedp.Void](`document.querySelectorAll('#manage-items tr').length === 1`),
		chromedp.Click(chromedp.CSS(`#manage-items tr button.open`)),
		chromedp.WaitVisible(chromedp.CSS(`#manage-edit button[data-action="ping"]`)),
		chromedp.Click(chromedp.CSS(`#manage-edit button[data-action="ping"]`)),
		chromedp.Poll[chromedp.Void](`document.querySelector('#manage-result').textContent.includes('HTTP 200')`),
	)
	if !strings.HasPrefix(secret, "whsec_") {
		t.Errorf("the secret shown: %q", secret)
	}
	id := e.create(keyAlice, `{"agent":"ops","messages":"hi"}`)
	e.follow(keyAlice, id).status("completed")
	var deliveries []string
	b.step("the delivery log",
		chromedp.Poll[chromedp.Void](`fetch('api/v2/webhooks/' + document.querySelector('#manage-items tr').dataset.name + '/deliveries?state=delivered&size=100', {credentials: 'same-origin'}).then(r => r.json()).then(p => p.total >= 3)`, chromedp.WithPollingTimeout(30*time.Second)),
		chromedp.Click(chromedp.CSS(`#manage-items tr button.open`)),
		chromedp.Poll[chromedp.Void](`document.querySelectorAll('#manage-sub tr').length >= 3`),
		eval(`[...document.querySelectorAll('#manage-sub tr')].map(r => r.textContent)`, &deliveries),
	)
	if !strings.Contains(strings.Join(deliveries, "\n"), "session.status_updated"+id+"delivered#1 HTTP 200") {
		t.Errorf("the delivery log:\n%s", strings.Join(deliveries, "\n"))
	}
	mu.Lock()
	if len(received) < 4 {
		t.Errorf("the receiver got %d requests", len(received))
	}
	mu.Unlock()

	// A schedule: run by hand, its run leads to its session; paused.
	var runs []string
	b.step("a schedule",
		chromedp.Click(chromedp.CSS(`#manage-tabs a[data-kind="schedules"]`)),
		chromedp.Poll[chromedp.Void](`document.querySelector('#manage-info').textContent.startsWith('0 schedules')`),
		chromedp.Click(chromedp.CSS(`#manage-new`)),
		setJSON(`{"name": "digest", "timing": {"type": "cron", "expression": "0 9 * * 1-5", "timezone": "Europe/Paris"}, "session_request": {"agent": "ops", "messages": "digest"}}`),
		chromedp.Click(chromedp.CSS(`#manage-edit button[type="submit"]`)),
		chromedp.Poll[chromedp.Void](`document.querySelectorAll('#manage-items tr').length === 1`),
		chromedp.Poll[chromedp.Void](`document.querySelector('#manage-items tr').textContent.includes('0 9 * * 1-5 (Europe/Paris)active')`),
		chromedp.Click(chromedp.CSS(`#manage-items tr button.open`)),
		chromedp.WaitVisible(chromedp.CSS(`#manage-edit button[data-action="trigger"]`)),
		chromedp.Click(chromedp.CSS(`#manage-edit button[data-action="trigger"]`)),
		chromedp.Poll[chromedp.Void](`document.querySelectorAll('#manage-sub tr a').length === 1`),
		eval(`[...document.querySelectorAll('#manage-sub tr')].map(r => r.textContent)`, &runs),
		chromedp.Click(chromedp.CSS(`#manage-edit button[data-action="pause"]`)),
		chromedp.Poll[chromedp.Void](`document.querySelector('#manage-items tr').textContent.includes('paused')`),
		chromedp.WaitVisible(chromedp.CSS(`#manage-edit button[data-action="resume"]`)),
		chromedp.Click(chromedp.CSS(`#manage-sub tr a`)),
		chromedp.WaitVisible(chromedp.CSS(`#status`)),
	)
	if len(runs) != 1 || !strings.Contains(runs[0], "(by hand)created") {
		t.Errorf("the runs: %q", runs)
	}
	if shots := os.Getenv("HRNS_UI_SCREENSHOTS"); shots != "" {
		b.step("screenshot", eval(`location.hash = '#/manage/webhooks'`, nil), chromedp.WaitVisible(chromedp.CSS(`#manage-items tr button.open`)),
			chromedp.Click(chromedp.CSS(`#manage-items tr button.open`)), chromedp.Poll[chromedp.Void](`document.querySelectorAll('#manage-sub tr').length >= 3`))
		b.shot(filepath.Join(shots, "ui-manage.png"))
	}
}

// TestUIKeyless: a server without keys says so on the page and asks
// for none, and its root leads to the page (behind a path prefix too).
func TestUIKeyless(t *testing.T) {
	model := openaitest.NewServer()
	t.Cleanup(model.Close)
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "hrns.db"), &sqlite.Options{RelaxedSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	m := session.New(st, &openai.Client{BaseURL: model.URL(), Model: "test-model"}, nil)
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(uiPrefix+"/", http.StripPrefix(uiPrefix, newServer(m, nil)))
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		srv.Close()
		m.Stop(context.Background())
	})
	req, _ := http.NewRequest("GET", srv.URL+uiPrefix+"/", nil)
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusFound || loc != "ui/" {
		t.Errorf("GET /: %d %q", resp.StatusCode, loc)
	}
	b := newUIBrowser(t)
	var got struct {
		URL     string `json:"url"`
		Keyless string `json:"keyless"`
		Login   bool   `json:"login"`
		Logout  bool   `json:"logout"`
	}
	b.step("open the root",
		chromedp.Navigate(srv.URL+uiPrefix+"/"),
		chromedp.WaitVisible(chromedp.CSS(`#sessions`)),
		chromedp.WaitVisible(chromedp.CSS(`#keyless`)),
		eval(`({url: location.pathname, keyless: document.querySelector('#keyless').textContent, login: !!document.querySelector('#key'), logout: !document.querySelector('#logout').hidden})`, &got),
	)
	if got.URL != uiPrefix+"/ui/" || !strings.Contains(got.Keyless, "No API keys") || got.Login || got.Logout {
		t.Errorf("a keyless server's page: %+v", got)
	}
}

func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestUIBrowserLive watches a session's browser live, in a headless
// Chromium: while the agent browses (a real Chromium of the session's
// web environment) the page shows its latest picture, which follows the
// agent from a red page to a blue one while the model is still thinking,
// with no screenshot in the events; another key sees nothing; once the
// session has ended there is no live picture, and the page says so.
func TestUIBrowserLive(t *testing.T) {
	chromium, err := browser.FindChromium()
	if err != nil {
		t.Skip(err)
	}
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		color := strings.TrimPrefix(r.URL.Path, "/")
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<!doctype html><title>%s</title><body style="margin:0;background:%s;height:100vh">%s</body>`, color, color, color)
	}))
	t.Cleanup(site.Close)
	gate1, gate2 := make(chan struct{}, 1), make(chan struct{}, 1)
	hold := func(gate chan struct{}, r openaitest.Reply) openaitest.Reply {
		return openaitest.Reply{Func: func([]byte) openaitest.Reply {
			select {
			case <-gate:
			case <-time.After(time.Minute):
			}
			return r
		}}
	}
	model := openaitest.NewServer(
		calls(openaitest.ToolCall("call_1", "browser_navigate", `{"url":"`+site.URL+`/red"}`)),
		hold(gate1, calls(openaitest.ToolCall("call_2", "browser_navigate", `{"url":"`+site.URL+`/blue"}`))),
		hold(gate2, openaitest.Reply{Text: "saw red, then blue"}),
	)
	t.Cleanup(model.Close)
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "hrns.db"), &sqlite.Options{RelaxedSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var live browser.Live
	web := func(p *session.EnvironmentParams) (*loop.Toolset, func(bool), error) {
		b := browser.New(&browser.Options{ExecPath: chromium, Allow: func(a netip.AddrPort) bool { return a.Addr().IsLoopback() }, LiveFrames: p.Session != ""})
		if p.Session == "" {
			return b.Tools(), nil, nil
		}
		live.Add(p.Session, b)
		return b.Tools(), func(bool) { live.Remove(p.Session, b); b.Close() }, nil
	}
	m := session.New(st, &openai.Client{BaseURL: model.URL(), Model: "test-model"}, &session.Options{
		SessionEnvironments: map[string]session.EnvironmentFunc{"web": web},
	})
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	frame := func(ctx context.Context, id string) ([]byte, time.Time, error) {
		f, err := live.Frame(ctx, id)
		return f.JPEG, f.At, err
	}
	mux := http.NewServeMux()
	mux.Handle(uiPrefix+"/", http.StripPrefix(uiPrefix, newServer(m, &server.Options{APIKeys: []string{keyAlice, keyBob}, LiveFrame: frame})))
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		srv.Close()
		m.Stop(context.Background())
	})
	e := &env{t: t, model: model, url: srv.URL + uiPrefix, st: st}

	b := newUIBrowser(t)
	b.login(e)
	id := e.create(keyAlice, `{"agent":{"name":"surfer","environments":["web"]},"messages":"look at the red page, then the blue one"}`)
	// pixel is the colour at the middle of the live picture.
	pixel := func(want string) chromedp.Action[chromedp.Void] {
		return chromedp.Poll[chromedp.Void](`(() => {
			const i = document.querySelector('#live[data-source="live"] #live-img');
			if (!i || !i.complete || !i.naturalWidth) return false;
			const c = document.createElement('canvas'); c.width = i.naturalWidth; c.height = i.naturalHeight;
			const g = c.getContext('2d'); g.drawImage(i, 0, 0);
			const [r, gr, b] = g.getImageData(c.width >> 1, c.height >> 1, 1, 1).data;
			return '` + want + `' === (r > 180 && gr < 80 && b < 80 ? 'red' : b > 180 && r < 80 && gr < 80 ? 'blue' : 'other');
		})()`)
	}
	var redFrames, blueFrames int
	var observations int
	b.step("red, live",
		eval(`location.hash = '#/s/`+id+`'`, nil),
		pixel("red"),
		eval(`Number(document.querySelector('#live').dataset.frames)`, &redFrames),
	)
	// Another key sees nothing of it.
	e.expect(e.do("GET", "/api/v2/sessions/"+id+"/live", keyBob, nil), http.StatusNotFound)
	r := e.expect(e.do("GET", "/api/v2/sessions/"+id+"/live", keyAlice, nil), http.StatusOK)
	if r.header.Get("Content-Type") != "image/jpeg" || r.header.Get("Cache-Control") != "no-store" || !bytes.HasPrefix(r.body, []byte{0xff, 0xd8}) {
		t.Errorf("a live frame: %v, %d bytes", r.header, len(r.body))
	}
	gate1 <- struct{}{}
	b.step("blue, live, while the model thinks",
		pixel("blue"),
		eval(`Number(document.querySelector('#live').dataset.frames)`, &blueFrames),
		eval(`document.querySelectorAll('.ev.observation_event').length`, &observations),
	)
	if observations != 0 || blueFrames <= redFrames {
		t.Errorf("frames %d then %d, %d screenshots in the events", redFrames, blueFrames, observations)
	}
	gate2 <- struct{}{}
	var note string
	b.step("ended",
		chromedp.WaitVisible(chromedp.CSS(`#status [data-state="completed"]`)),
		chromedp.Poll[chromedp.Void](`document.querySelector('#live-note').textContent.startsWith('the session has ended')`),
		eval(`document.querySelector('#live-note').textContent`, &note),
	)
	e.expect(e.do("GET", "/api/v2/sessions/"+id+"/live", keyAlice, nil), http.StatusNotFound)
	if shots := os.Getenv("HRNS_UI_SCREENSHOTS"); shots != "" {
		b.shot(filepath.Join(shots, "ui-live.png"))
	}
}

// TestUIBrowserMarkdownBounded: answers made to be slow to parse (long
// runs of emphasis markers, backticks and brackets, deep lists and
// quotes, a text past the Markdown limit) are shown whole, as text where
// the limits say so.
func TestUIBrowserMarkdownBounded(t *testing.T) {
	var deepList strings.Builder
	for i := range 200 {
		deepList.WriteString(strings.Repeat("  ", i) + "- item\n")
	}
	answers := []string{
		strings.Repeat("*a", 10000),
		"a " + strings.Repeat("`", 5000) + "x" + strings.Repeat("_b", 5000),
		strings.Repeat("[", 10000) + "](https://example.com/)" + strings.Repeat("]", 5000),
		strings.Repeat(">", 5000) + " deep\n\n" + deepList.String(),
		strings.Repeat("**x** ", 20000),
	}
	var replies []openaitest.Reply
	for _, a := range answers {
		replies = append(replies, openaitest.Reply{Text: a + " END"})
	}
	e := newUIEnv(t, replies...)
	b := newUIBrowser(t)
	b.login(e)
	for i := range answers {
		id := e.create(keyAlice, `{"agent":"ops","messages":"hi"}`)
		var shown struct {
			End    bool `json:"end"`
			Plain  bool `json:"plain"`
			Strong int  `json:"strong"`
		}
		b.step(fmt.Sprintf("answer %d", i),
			eval(`location.hash = '#/s/`+id+`'`, nil),
			chromedp.WaitVisible(chromedp.CSS(`.ev.answer_event .answer`)),
			eval(`(() => { const a = document.querySelector('.ev.answer_event .answer'); return {end: a.textContent.trimEnd().endsWith('END'), plain: a.textContent.includes('shown as it is'), strong: a.querySelectorAll('strong').length}; })()`, &shown),
		)
		if !shown.End {
			t.Errorf("answer %d is not shown whole", i)
		}
		if i == 4 && (!shown.Plain || shown.Strong != 0) {
			t.Errorf("a text past the limit: %+v", shown)
		}
	}
}
