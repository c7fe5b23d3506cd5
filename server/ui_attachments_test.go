package server_test

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/hrns-dev/hrns/openai/openaitest"
)

// TestUIBrowserAttachments: a file attached to a message reaches an open
// session page live, as an AttachmentEvent shown as text, even when its
// name is markup.
func TestUIBrowserAttachments(t *testing.T) {
	e := newUIEnv(t, openaitest.Reply{Text: "read it"})
	br := newUIBrowser(t)
	step := br.step
	br.login(e)
	id := e.create(keyAlice, `{"agent":{"name":"reader","environments":[]},"idle_timeout_s":60}`)
	step("open session",
		eval(`location.hash = '#/s/`+id+`'`, nil),
		chromedp.WaitVisible(chromedp.CSS(`#status [data-state="idle"]`)),
	)
	name := `<img src=x onerror=window.pwned=1>.txt`
	msg := fmt.Sprintf(`{"message":"see the file","files":[{"source":%q,"name":%q}]}`, base64.StdEncoding.EncodeToString([]byte("hi")), name)
	e.expect(e.do("POST", "/api/v2/sessions/"+id+"/messages", keyAlice, msg), http.StatusAccepted)
	var got struct {
		Text  string `json:"text"`
		Pwned string `json:"pwned"`
		Imgs  int    `json:"imgs"`
	}
	step("attachment shown",
		chromedp.WaitVisible(chromedp.CSS(`.ev[data-type="AttachmentEvent"]`)),
		eval(`({text: document.querySelector('.ev[data-type="AttachmentEvent"]').textContent, pwned: typeof window.pwned, imgs: document.querySelectorAll('img').length})`, &got),
	)
	if !strings.Contains(got.Text, "files/"+name+" (text/plain; charset=utf-8, 2 bytes)") || got.Pwned != "undefined" || got.Imgs != 0 {
		t.Errorf("attachment shown as %+v", got)
	}
}
