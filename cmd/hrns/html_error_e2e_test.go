package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestHTMLErrorSaidOnce: a server answering every request with a proxy's
// HTML error page (HTTP 502, retried) has its page described once, by its
// title, on the first retry line; the other retries say they failed the
// same way, and the page's markup is quoted once, in the final error.
func TestHTMLErrorSaidOnce(t *testing.T) {
	const page = "<!DOCTYPE html>\n<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway</h1></center><hr><center>nginx</center></body></html>\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusBadGateway)
		io.WriteString(w, page)
	}))
	defer srv.Close()
	r := hrns(t, t.TempDir(), nil, "run", "--base-url", srv.URL+"/v1", "--model", "gpt-4.1", "--tools", "none", "--no-skills", "hi")
	if r.code == 0 {
		t.Fatalf("exit 0:\n%s", r.stderr)
	}
	if n := strings.Count(r.stderr, "<!DOCTYPE html>"); n > 1 {
		t.Errorf("the page's markup is printed %d times:\n%s", n, r.stderr)
	}
	if n := strings.Count(r.stderr, "an HTML page titled “502 Bad Gateway”"); n != 1 {
		t.Errorf("the page is described %d times, want once on the first retry:\n%s", n, r.stderr)
	}
	if n := strings.Count(r.stderr, "failed the same way"); n < 1 {
		t.Errorf("the later retries repeat the error:\n%s", r.stderr)
	}
}
