package cli

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"
	"syscall"

	"github.com/hrns-dev/hrns/anthropic"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/openai"
	"github.com/hrns-dev/hrns/responses"
)

// diagnosed wraps a model so that the errors a person can fix by hand say
// which URL failed and what to try:
//
//   - a server that refuses the connection before any request has
//     succeeded is not reachable: the run fails at once, saying so, instead
//     of retrying a server that is not there (once one request succeeded, a
//     refused connection is retried as a blip);
//   - a 404 names the URL, and suggests /v1 for an OpenAI-compatible base
//     URL without it.
type diagnosed struct {
	llm.Model
	kind, base string
	reached    bool
}

// diagnose wraps m, whose endpoint it reads from the provider's client.
func diagnose(m llm.Model) llm.Model {
	d := &diagnosed{Model: m}
	switch c := m.(type) {
	case *openai.Client:
		d.kind, d.base = "openai", firstString(c.BaseURL, openai.DefaultBaseURL)
	case *responses.Client:
		d.kind, d.base = "openai-responses", firstString(c.BaseURL, responses.DefaultBaseURL)
	case *anthropic.Client:
		d.kind, d.base = "anthropic", firstString(c.BaseURL, anthropic.DefaultBaseURL)
	default:
		return m
	}
	return d
}

// Stream implements [llm.Model].
func (d *diagnosed) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Chunk, error] {
	return func(yield func(llm.Chunk, error) bool) {
		for c, err := range d.Model.Stream(ctx, req) {
			if err != nil {
				err = d.explain(err)
			} else {
				d.reached = true
			}
			if !yield(c, err) {
				return
			}
		}
	}
}

// errUnreachable is a refused connection to a server never reached: not
// retried (it wraps no errno, so llm.IsRetryable says no).
type errUnreachable struct{ base, cause string }

func (e *errUnreachable) Error() string {
	return fmt.Sprintf("the model server is not reachable at %s (%s): is it running, and is the base URL right? (--base-url, OPENAI_BASE_URL or ANTHROPIC_BASE_URL, or base_url in the config)", e.base, e.cause)
}

func (d *diagnosed) explain(err error) error {
	if errors.Is(err, syscall.ECONNREFUSED) && !d.reached {
		return &errUnreachable{base: d.base, cause: "connection refused"}
	}
	var api *llm.APIError
	if errors.As(err, &api) && api.StatusCode == 404 && !strings.Contains(err.Error(), d.base) {
		hint := ""
		if base := strings.TrimRight(d.base, "/"); d.kind != "anthropic" && !strings.HasSuffix(base, "/v1") {
			hint = fmt.Sprintf(": OpenAI-compatible servers serve their API under /v1; try --base-url %s/v1", base)
		}
		return fmt.Errorf("%w\nThe server at %s answered 404 Not Found%s", err, d.base, hint)
	}
	return err
}

// ReasoningSupport passes the wrapped provider's table on (see
// [llm.ReasoningReporter]), so that --reasoning-effort is mapped as the
// provider takes it.
func (d *diagnosed) ReasoningSupport(model string) llm.ReasoningSupport {
	if r, ok := d.Model.(llm.ReasoningReporter); ok {
		return r.ReasoningSupport(model)
	}
	return llm.ReasoningSupport{}
}
