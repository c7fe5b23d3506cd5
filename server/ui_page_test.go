package server_test

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/hrns-dev/hrns/openai/openaitest"
)

// TestUIBrowserStartSession starts a session from the page's form, in a
// headless Chromium: an agent of the server, a message, an image (which
// the model sees) and a CSV file (written into the session's workspace
// before the agent starts, and named in the message); then a follow-up
// with a file from the session page. Too many files are refused before
// anything is sent, and the form keeps the message.
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
		chromedp.WaitVisible(chromedp.CSS(`#new-agent option[value="ops"]`)),
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
		eval(`document.querySelector('#answer').textContent`, &answer),
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
