// Package replay records the model's side of a run and plays it back.
//
// A [Recorder] wraps a model and appends every response it completes to a
// JSON Lines file. A [Player] is a model that answers each request with the
// next recorded response, streamed again as chunks, whatever the request
// says: tools still really run, so a recorded session replays against the
// files and commands of the machine it runs on. Record a session once
// against a real model, then replay it offline for demos and tests (the
// package's Example runs this):
//
//	rec, err := replay.Create("session.jsonl", model, "claude-sonnet-4-5")
//	... run the agent with rec as its model, then rec.Close()
//	player, err := replay.Open("session.jsonl")
//	... run the same agent with player as its model
//
// The file holds a header line, then one line per response:
//
//	{"hrns_replay":1}
//	{"response":{"message":{...},"usage":{...},"finish_reason":"tool_calls"}}
package replay

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"os"
	"sync"

	"github.com/hrns-dev/hrns/llm"
)

// Version is the format version written in the header line.
const Version = 1

// ErrExhausted is returned by a [Player] asked for more responses than were
// recorded.
var ErrExhausted = errors.New("replay: no more recorded responses")

type header struct {
	Version int    `json:"hrns_replay"`
	Model   string `json:"model,omitempty"`
}

type entry struct {
	Response *llm.Response `json:"response"`
}

// A Recorder is a model that passes requests to another and records its
// complete responses. Failed attempts are not recorded: a replay sees the
// responses the run went on with. It is safe for concurrent use.
type Recorder struct {
	model llm.Model

	mu  sync.Mutex
	f   *os.File
	w   *bufio.Writer
	err error
}

var _ llm.Model = (*Recorder)(nil)

// Create creates (or truncates) the file at path and returns a recorder of
// model's responses into it. modelName is noted in the header.
func Create(path string, model llm.Model, modelName string) (*Recorder, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	r := &Recorder{model: model, f: f, w: bufio.NewWriter(f)}
	if err := r.write(header{Version: Version, Model: modelName}); err != nil {
		f.Close()
		return nil, err
	}
	return r, nil
}

func (r *Recorder) write(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return r.err
	}
	r.w.Write(b)
	r.w.WriteByte('\n')
	// Flush each line: a run cut short still leaves a usable recording.
	if err := r.w.Flush(); err != nil {
		r.err = fmt.Errorf("replay: %w", err)
	}
	return r.err
}

// Stream implements [llm.Model].
func (r *Recorder) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Chunk, error] {
	return func(yield func(llm.Chunk, error) bool) {
		for c, err := range r.model.Stream(ctx, req) {
			if err != nil {
				yield(c, err)
				return
			}
			if c.Kind == llm.ChunkDone {
				if werr := r.write(entry{Response: c.Response}); werr != nil {
					yield(llm.Chunk{}, werr)
					return
				}
			}
			if !yield(c, nil) {
				return
			}
		}
	}
}

// Close flushes and closes the file. It is safe to call more than once.
func (r *Recorder) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f == nil {
		return r.err
	}
	err := errors.Join(r.w.Flush(), r.f.Close())
	r.f = nil
	if r.err == nil && err != nil {
		r.err = fmt.Errorf("replay: %w", err)
	}
	return r.err
}

// A Player is a model that answers with recorded responses, in order. It is
// safe for concurrent use.
type Player struct {
	// Model is the model name from the recording's header.
	Model string

	mu        sync.Mutex
	responses []*llm.Response
	next      int
}

var _ llm.Model = (*Player)(nil)

// Open reads a recording.
func Open(path string) (*Player, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	p := &Player{}
	line := 0
	for sc.Scan() {
		line++
		if len(sc.Bytes()) == 0 {
			continue
		}
		if line == 1 {
			var h header
			if err := json.Unmarshal(sc.Bytes(), &h); err != nil || h.Version == 0 {
				return nil, fmt.Errorf("replay: %s: not an hrns recording (the first line must be {\"hrns_replay\":%d})", path, Version)
			}
			if h.Version > Version {
				return nil, fmt.Errorf("replay: %s: format version %d is newer than this hrns reads (%d)", path, h.Version, Version)
			}
			p.Model = h.Model
			continue
		}
		var e entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.Response == nil {
			return nil, fmt.Errorf("replay: %s:%d: not a recorded response: %v", path, line, err)
		}
		e.Response.Message.Role = llm.RoleAssistant
		p.responses = append(p.responses, e.Response)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("replay: %s: %w", path, err)
	}
	if line == 0 {
		return nil, fmt.Errorf("replay: %s is empty", path)
	}
	return p, nil
}

// Remaining returns how many responses are left.
func (p *Player) Remaining() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.responses) - p.next
}

// Stream implements [llm.Model]: it streams the next recorded response.
func (p *Player) Stream(ctx context.Context, _ *llm.Request) iter.Seq2[llm.Chunk, error] {
	return func(yield func(llm.Chunk, error) bool) {
		p.mu.Lock()
		if p.next >= len(p.responses) {
			n := len(p.responses)
			p.mu.Unlock()
			yield(llm.Chunk{}, fmt.Errorf("%w (%d recorded)", ErrExhausted, n))
			return
		}
		resp := p.responses[p.next]
		p.next++
		p.mu.Unlock()
		for c := range llm.ResponseChunks(resp) {
			if err := ctx.Err(); err != nil {
				yield(llm.Chunk{}, err)
				return
			}
			if !yield(c, nil) {
				return
			}
		}
	}
}

// ReasoningSupport passes the recorded model's table on, when it has one
// (see [llm.ReasoningReporter]).
func (r *Recorder) ReasoningSupport(model string) llm.ReasoningSupport {
	if rr, ok := r.model.(llm.ReasoningReporter); ok {
		return rr.ReasoningSupport(model)
	}
	return llm.ReasoningSupport{}
}
