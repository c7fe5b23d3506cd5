package callview

import "testing"

func TestErrorTextAndRetryLine(t *testing.T) {
	tests := []struct{ in, want string }{
		{"openai: HTTP 500: boom", "openai: HTTP 500: boom"},
		{"openai: HTTP 502: <!DOCTYPE html><html><head><title>502 Bad &amp; Gateway</title></head></html>",
			"openai: HTTP 502: an HTML page titled “502 Bad & Gateway” (not the API's answer: is the base URL right?)"},
		{"x: <HTML>\n<body>no title</body></HTML>", "x: an HTML page (not the API's answer: is the base URL right?)"},
		{"x: <title>only a title</title>", "x: <title>only a title</title>"},
	}
	for _, tt := range tests {
		if got := ErrorText(tt.in); got != tt.want {
			t.Errorf("ErrorText(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got := RetryLine("1s", 2, "boom", "boom"); got != "retrying in 1s (attempt 2 failed the same way)" {
		t.Errorf("same error: %q", got)
	}
	if got := RetryLine("1s", 2, "boom", "bang"); got != "retrying in 1s (attempt 2 failed: boom)" {
		t.Errorf("another error: %q", got)
	}
}
