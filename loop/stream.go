package loop

import (
	"context"
	"fmt"
	"io"

	"github.com/hrns-dev/hrns/llm"
)

// Step 4 of a turn, within each attempt (see run.runTurns): reading the
// model's stream.

// readStream reads the stream of one attempt of a model request, relaying
// its text, reasoning and call deltas as chunks, and returns the response
// it ends with.
func (r *run) readStream(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	var calls streamCalls // by stream index, for delta chunks
	for c, err := range r.agent.model.Stream(ctx, req) {
		if err != nil {
			return nil, err
		}
		var out Chunk
		switch c.Kind {
		case llm.ChunkText:
			out = Chunk{Type: ChunkMessage, Content: c.Text}
		case llm.ChunkReasoning:
			out = Chunk{Type: ChunkReasoning, Content: c.Text}
		case llm.ChunkToolCallStart:
			calls.set(c.Index, ToolCallInfo{ID: c.ID, Name: c.Name})
			out = Chunk{Type: ChunkToolCallDelta, ToolCall: &ToolCallInfo{ID: c.ID, Name: c.Name}}
		case llm.ChunkToolCallDelta:
			info := calls.get(c.Index)
			out = Chunk{Type: ChunkToolCallDelta, Content: c.Text, ToolCall: &info}
		case llm.ChunkDone:
			if c.Response == nil {
				return nil, fmt.Errorf("model stream: done without a response: %w", io.ErrUnexpectedEOF)
			}
			return c.Response, nil
		default:
			continue
		}
		if !r.emit(out) {
			return nil, context.Canceled
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("model stream ended without a response: %w", io.ErrUnexpectedEOF)
}

// streamCalls names the calls of a stream by the index the model stream
// gave them. Indices come from the model: a negative or huge one must not
// panic or allocate, so those live in a map.
type streamCalls struct {
	dense  []ToolCallInfo
	sparse map[int]ToolCallInfo
}

// maxDenseIndex bounds the indices kept in a slice; models number their
// calls from 0, so real indices stay far below it.
const maxDenseIndex = 256

func (s *streamCalls) set(i int, c ToolCallInfo) {
	if i < 0 || i >= maxDenseIndex {
		if s.sparse == nil {
			s.sparse = make(map[int]ToolCallInfo)
		}
		if len(s.sparse) < maxDenseIndex {
			s.sparse[i] = c
		}
		return
	}
	for len(s.dense) <= i {
		s.dense = append(s.dense, ToolCallInfo{})
	}
	s.dense[i] = c
}

func (s *streamCalls) get(i int) ToolCallInfo {
	if i >= 0 && i < len(s.dense) {
		return s.dense[i]
	}
	return s.sparse[i]
}
