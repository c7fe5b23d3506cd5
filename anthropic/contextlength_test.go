package anthropic

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/llm/llmtest"
)

// TestContextLengthGolden: the provider's own refusals of a request too
// long for the model's context window, as its API sends them (recorded in
// testdata; see docs/loop.md, "Compaction", for where each body was
// seen), are llm.ErrContextLength, so that the loop compacts the
// transcript and sends the request again instead of failing the run.
func TestContextLengthGolden(t *testing.T) {
	for _, tc := range []struct {
		file    string
		status  int
		message string // a substring of the error's message
	}{
		{"context_length.http", 400, "prompt is too long: 203284 tokens > 200000 maximum"},
		{"context_limit.http", 400, "exceed context limit"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			raw := readTestdata(t, tc.file)
			srv := llmtest.ServeRecorded(t, "testdata/"+tc.file, raw)
			_, err := collect(testClient(srv).Stream(context.Background(), &llm.Request{Messages: []llm.Message{llm.UserMessage("hi")}}))
			if !errors.Is(err, llm.ErrContextLength) {
				t.Fatalf("error %v is not llm.ErrContextLength", err)
			}
			if llm.IsRetryable(err) {
				t.Errorf("error %v is retryable: sending it again unchanged cannot succeed", err)
			}
			apiErr, ok := errors.AsType[*llm.APIError](err)
			if !ok || apiErr.StatusCode != tc.status || !strings.Contains(apiErr.Message, tc.message) {
				t.Errorf("error %#v, want status %d and a message with %q", apiErr, tc.status, tc.message)
			}
		})
	}
}
