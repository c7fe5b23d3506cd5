package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/openai"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/server"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store/sqlite"
)

// TestUIBrowserPersonReason: a call only a person may approve shows, on
// its approval card in the page, why (the tool's reason, as text: markup
// in it is no element, a bidi override shows as an escape), on a server
// that approves other calls by itself; approved there, it runs.
func TestUIBrowserPersonReason(t *testing.T) {
	ran := make(chan string, 1)
	pay := loop.NewTool("pay", "Types a card's code.", func(_ context.Context, in struct {
		Code string `json:"code"`
	}) (string, error) {
		ran <- in.Code
		return "paid", nil
	})
	pay.AskPerson = func(args json.RawMessage) string {
		var in struct {
			Code string `json:"code"`
		}
		json.Unmarshal(args, &in)
		return "typing into a password field: the page's field \"<img src=x onerror=alert(1)>PIN\u202etxt.exe\" gets the text " + in.Code
	}
	model := openaitest.NewServer(calls(openaitest.ToolCall("call_pay", "pay", `{"code":"1234"}`)), openaitest.Reply{Text: "paid"})
	t.Cleanup(model.Close)
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "hrns.db"), &sqlite.Options{RelaxedSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	m := session.New(st, &openai.Client{BaseURL: model.URL(), Model: "test-model"}, &session.Options{
		AutoApprove: true,
		Agents:      map[string]*session.AgentConfig{"payer": {Description: "Pays.", Toolsets: []string{"pay"}}},
		Toolsets:    map[string]*loop.Toolset{"pay": loop.MustToolset(pay)},
	})
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(uiPrefix+"/", http.StripPrefix(uiPrefix, newServer(m, &server.Options{APIKeys: []string{keyAlice, keyBob}})))
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		srv.Close()
		m.Stop(context.Background())
	})
	e := &env{t: t, model: model, url: srv.URL + uiPrefix, st: st}
	b := newUIBrowser(t)
	b.login(e)
	id := e.create(keyAlice, `{"agent":"payer","messages":"pay"}`)
	var shown struct {
		Text string `json:"text"`
		Imgs int    `json:"imgs"`
	}
	b.step("the reason on the card",
		eval(`location.hash = '#/s/`+id+`'`, nil),
		chromedp.WaitVisible(chromedp.CSS(`.card.approval[data-call="call_pay"] .person-reason`)),
		eval(`(() => { const r = document.querySelector('.card.approval .person-reason'); return {text: r.textContent, imgs: document.querySelectorAll('.card.approval img').length}; })()`, &shown),
	)
	if !strings.Contains(shown.Text, `typing into a password field: the page's field "<img src=x onerror=alert(1)>PIN\u202etxt.exe" gets the text 1234`) || shown.Imgs != 0 {
		t.Fatalf("the card says %q (%d images)", shown.Text, shown.Imgs)
	}
	select {
	case c := <-ran:
		t.Fatalf("ran %q before a person approved it", c)
	default:
	}
	b.step("approve",
		chromedp.WaitEnabled(chromedp.CSS(`.card.approval[data-call="call_pay"] .approve`)), // enabled a moment after it shows
		chromedp.Click(chromedp.CSS(`.card.approval[data-call="call_pay"] .approve`)),
		chromedp.WaitVisible(chromedp.CSS(`#status [data-state="completed"]`)),
	)
	if c := <-ran; c != "1234" {
		t.Fatalf("ran %q", c)
	}
}
