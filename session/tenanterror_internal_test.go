package session

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
)

// What a tenant reads of model errors: what happened, never where.
func TestTenantError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, refused := http.Post("http://"+addr+"/v1/chat/completions?key=S", "application/json", nil)
	if refused == nil {
		t.Fatal("a closed port answered")
	}
	refused = fmt.Errorf("openai: %w", refused)
	_, unresolved := http.Get("http://no-such-host.invalid/v1")
	apiErr := &llm.APIError{Provider: "openai", StatusCode: 429, Type: "rate_limit_error", Message: strings.Repeat("slow down ", 1000)}
	for _, c := range []struct {
		err  error
		want string
	}{
		{refused, "the model server could not be reached (connection refused)"},
		{fmt.Errorf("%w after 3 attempts: %w", loop.ErrRetriesExhausted, refused), "model request retries exhausted after 3 attempts: the model server could not be reached (connection refused)"},
		{fmt.Errorf("openai: %w", unresolved), "the model server could not be reached (its name does not resolve)"},
		{errors.New("openai: read tcp 10.0.0.1:5000->10.0.0.5:11434: use of closed connection"), "openai: read tcp [address]: use of closed connection"},
		{errors.New("openai: http://10.0.0.5:11434/v1/chat/completions answered with an HTML page: <title>x</title>"), "openai: [URL] answered with an HTML page: <title>x</title>"},
		{errors.New("lookup ollama.internal on 10.0.0.2:53: no such host"), "lookup [name]: no such host"},
		{errors.New("dial [fd00::5]:11434 and 10.0.0.7 failed"), "dial [address] and [address] failed"},
		// The server's file paths (an environment that could not be set
		// up), not the words with a slash in them.
		{fmt.Errorf("environment \"web\": %w", &fs.PathError{Op: "mkdir", Path: "/srv/hrns data/profiles/x", Err: syscall.ENOTDIR}), "environment \"web\": mkdir [path]: not a directory"},
		{errors.New("seeding the profile: open /var/lib/hrns/p.zip: permission denied"), "seeding the profile: open [path]: permission denied"},
		{fmt.Errorf("linking: %w", &os.LinkError{Op: "rename", Old: "/a b/x", New: "/a b/y", Err: syscall.EXDEV}), "linking: rename [path] [path]: invalid cross-device link"},
		{errors.New("a files/report.pdf of type application/json: input/output error"), "a files/report.pdf of type application/json: input/output error"},
	} {
		if got := tenantError(c.err); got != c.want {
			t.Errorf("tenantError(%v)\n = %q\nwant %q", c.err, got, c.want)
		}
	}
	got := tenantError(apiErr)
	if !strings.HasPrefix(got, "openai: HTTP 429 rate_limit_error: slow down") || len(got) > maxTenantError+len("…") {
		t.Errorf("an API error reads %d bytes: %.100q", len(got), got)
	}
}
