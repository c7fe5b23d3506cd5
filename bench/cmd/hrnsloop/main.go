// Command hrnsloop runs the benchmarks' task with hrns's loop library: an
// [openai.Client] and one typed tool made by [loop.NewTool].
//
//	hrnsloop --base-url http://127.0.0.1:40123/v1 --runs 40
//
// With --variant drain, the client's HTTP transport reads the rest of each
// response body before closing it. That is not what hrns does: it measures
// the change proposed for [openai.Client] in docs/performance.md (a stream
// closed right after [DONE] loses its keep-alive connection).
package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"

	"github.com/hrns-dev/hrns/bench/internal/task"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/openai"
)

func main() {
	os.Exit(task.Main("hrnsloop", os.Args[1:], os.Stdout, os.Stderr, setup))
}

func setup(f *task.Flags) (task.RunFunc, error) {
	client := &openai.Client{BaseURL: f.BaseURL, APIKey: "bench", Model: f.Model}
	switch f.Variant {
	case "":
	case "drain":
		client.HTTPClient = &http.Client{Transport: drainTransport{http.DefaultTransport}}
	default:
		return nil, fmt.Errorf("unknown variant %q; there is drain", f.Variant)
	}
	read := loop.NewTool(task.ToolName, task.Description, func(_ context.Context, in task.Args) (string, error) {
		return task.Read(in.Path), nil
	})
	agent := loop.NewAgent(client, loop.MustToolset(read), nil)
	msgs := []llm.Message{llm.SystemMessage(task.System), llm.UserMessage(task.Prompt)}
	return func(ctx context.Context) (string, error) {
		res, err := agent.Run(ctx, msgs)
		if err != nil {
			return "", err
		}
		return res.Answer, nil
	}, nil
}

// drainTransport gives responses a body that, when closed, first reads what
// is left of it (up to 4 KiB), so that the connection can be reused.
type drainTransport struct{ http.RoundTripper }

func (t drainTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.RoundTripper.RoundTrip(r)
	if err == nil {
		resp.Body = drainBody{resp.Body}
	}
	return resp, err
}

type drainBody struct{ io.ReadCloser }

func (b drainBody) Close() error {
	io.Copy(io.Discard, io.LimitReader(b.ReadCloser, 4<<10))
	return b.ReadCloser.Close()
}
