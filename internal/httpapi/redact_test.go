package httpapi

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
)

// closedURL returns the address of a loopback listener that was closed:
// a connection to it is refused.
func closedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

// A request that gets no answer says so with its URL, as the person at
// the terminal needs, but never with a key of its query or a password.
func TestSendErrorRedactsQueryKeysAndPasswords(t *testing.T) {
	base := closedURL(t)
	u := strings.Replace(base, "http://", "http://user:PASSWORDSECRET@", 1) + "/v1beta/models/m:streamGenerateContent?alt=sse&key=KEYSECRET"
	c := &Client{Provider: "gemini", StatusError: func(*http.Response) error { return nil }}
	_, err := c.Send(context.Background(), "POST", u, []byte("{}"), "text/event-stream")
	if err == nil {
		t.Fatal("no error from a closed port")
	}
	msg := err.Error()
	for _, secret := range []string{"KEYSECRET", "PASSWORDSECRET"} {
		if strings.Contains(msg, secret) {
			t.Errorf("the error shows %s: %s", secret, msg)
		}
	}
	if !strings.Contains(msg, strings.TrimPrefix(base, "http://")) || !strings.Contains(msg, "key=REDACTED") {
		t.Errorf("the error lost the URL the person at the terminal needs: %s", msg)
	}
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://h/p?key=S":                   "https://h/p?key=REDACTED",
		"https://u:pw@h/p":                    "https://u:xxxxx@h/p",
		"https://h/p":                         "https://h/p",
		"https://h/p?key=S/v1beta/x?alt=sse":  "https://h/p?key=REDACTED",
		"http://h/%zz?key=S":                  "http://h/%zz",
		"http://u:pw@h/%zz?key=S":             "http://REDACTED@h/%zz",
		"https://h/p?a=1&key=S#frag-secret=1": "https://h/p?a=REDACTED&key=REDACTED",
	} {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}
