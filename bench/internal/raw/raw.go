// Package raw is the benchmarks' baseline: the least work any agent loop
// must do to run [task] against an OpenAI-compatible endpoint, written
// plainly with the standard library.
//
// Each turn it marshals the conversation with encoding/json, posts it over a
// keep-alive connection (reading each body to its end so that the connection
// is reused), reads the event stream line by line with a
// [bufio.Reader], decodes every chunk with [json.Unmarshal] into a fresh
// value, concatenates the text and each call's argument fragments, runs the
// tool as a local function, appends the assistant message and the tool
// results, and loops until the model answers without calls.
//
// It checks no schema, emits no events, retries nothing and keeps no usage:
// a harness does more, and the ratio of its CPU time to this one's is what
// that costs.
package raw

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/hrns-dev/hrns/bench/internal/task"
)

// A Client runs the task. Set its fields before the first run.
type Client struct {
	// BaseURL is the API root, ending in /v1.
	BaseURL string
	// Model is sent in every request.
	Model string
	// HTTPClient sends the requests; nil means [http.DefaultClient].
	HTTPClient *http.Client
	// ResultBytes is the size of the tool's results (see [task.Result]).
	ResultBytes int
}

// Message is one message of the conversation, as sent.
type Message struct {
	Role       string     `json:"role"`
	Content    *string    `json:"content"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

// ToolCall is a call of an assistant message.
type ToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type request struct {
	Model         string          `json:"model"`
	Messages      []Message       `json:"messages"`
	Tools         json.RawMessage `json:"tools"`
	Stream        bool            `json:"stream"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// tools is the tool list of every request, written once.
var tools = json.RawMessage(`[{"type":"function","function":{"name":"` + task.ToolName + `","description":"` + task.Description + `",` +
	`"parameters":{"type":"object","properties":{"path":{"type":"string","description":"the file to read"}},"required":["path"],"additionalProperties":false}}}]`)

// Chunk is what the baseline decodes of a chat.completion.chunk.
type Chunk struct {
	Choices []struct {
		Delta struct {
			Content   string `json:"content"`
			ToolCalls []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

// Run does one run of the task and returns the final answer.
func (c *Client) Run(ctx context.Context) (string, error) {
	msgs := FirstMessages()
	for {
		acc, err := c.Turn(ctx, msgs)
		if err != nil {
			return "", err
		}
		text, calls := acc.Text.String(), acc.Calls
		if len(calls) == 0 {
			return text, nil
		}
		msgs = append(msgs, Message{Role: "assistant", Content: nil, ToolCalls: calls})
		if text != "" {
			msgs[len(msgs)-1].Content = &text
		}
		for _, call := range calls {
			out, err := task.ReadArgsSized([]byte(call.Function.Arguments), c.ResultBytes)
			if err != nil {
				out = err.Error()
			}
			msgs = append(msgs, Message{Role: "tool", Content: &out, ToolCallID: call.ID})
		}
	}
}

// FirstMessages returns the system and user messages a run starts with.
func FirstMessages() []Message {
	system, prompt := task.System, task.Prompt
	return []Message{{Role: "system", Content: &system}, {Role: "user", Content: &prompt}}
}

// Turn sends one request with msgs and reads its streamed answer.
func (c *Client) Turn(ctx context.Context, msgs []Message) (*Accumulator, error) {
	body, err := json.Marshal(&request{Model: c.Model, Messages: msgs, Tools: tools, Stream: true,
		StreamOptions: struct {
			IncludeUsage bool `json:"include_usage"`
		}{true}})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.BaseURL+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer bench")
	hc := c.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return nil, fmt.Errorf("status %s: %s", resp.Status, b)
	}
	acc := &Accumulator{}
	if err := ReadStream(resp.Body, acc.Add); err != nil {
		return nil, err
	}
	// Read the end of the body (the chunked encoding's last chunk) so
	// that the connection goes back to the pool: a body closed unread
	// closes its connection, and the next turn dials a new one.
	io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	acc.Finish()
	return acc, nil
}

// ReadStream reads an event stream and calls fn with the data of every
// "data:" line until [DONE] or the end of the body. The slice is valid only
// during the call.
func ReadStream(r io.Reader, fn func(data []byte) error) error {
	br := bufio.NewReaderSize(r, 16<<10)
	for {
		line, err := br.ReadSlice('\n')
		if err != nil && !(err == io.EOF && len(line) > 0) {
			if err == io.EOF {
				return nil
			}
			return err
		}
		data, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r\n"), []byte("data:"))
		if !ok {
			continue
		}
		data = bytes.TrimPrefix(data, []byte(" "))
		if string(data) == "[DONE]" {
			return nil
		}
		if err := fn(data); err != nil {
			return err
		}
	}
}

// An Accumulator assembles the chunks of one streamed answer.
type Accumulator struct {
	// Text is the content so far.
	Text strings.Builder
	// Calls are the tool calls so far, by their stream index. Their
	// arguments are set by [Accumulator.Finish].
	Calls []ToolCall
	// Chunks counts the chunks added.
	Chunks int

	args [][]byte // the argument fragments of Calls, joined
}

// Add decodes one chunk with encoding/json and adds it.
func (a *Accumulator) Add(data []byte) error {
	var ch Chunk
	if err := json.Unmarshal(data, &ch); err != nil {
		return fmt.Errorf("decoding chunk: %w", err)
	}
	a.Chunks++
	for _, choice := range ch.Choices {
		a.Text.WriteString(choice.Delta.Content)
		for _, d := range choice.Delta.ToolCalls {
			if d.Index < 0 || d.Index > 128 {
				return errors.New("tool call index out of range")
			}
			for len(a.Calls) <= d.Index {
				a.Calls = append(a.Calls, ToolCall{Type: "function"})
				a.args = append(a.args, nil)
			}
			tc := &a.Calls[d.Index]
			if d.ID != "" {
				tc.ID = d.ID
			}
			if d.Function.Name != "" {
				tc.Function.Name = d.Function.Name
			}
			a.args[d.Index] = append(a.args[d.Index], d.Function.Arguments...)
		}
	}
	return nil
}

// Finish sets the arguments of the calls from their fragments.
func (a *Accumulator) Finish() {
	for i := range a.Calls {
		a.Calls[i].Function.Arguments = string(a.args[i])
	}
}
