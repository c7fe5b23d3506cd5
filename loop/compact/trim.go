package compact

import (
	"context"
	"fmt"
	"slices"

	"github.com/hrns-dev/hrns/llm"
)

// Trim replaces the content of old tool results by a stub that names the
// call and says how many bytes were dropped, oldest first, until the
// transcript reaches the target. It makes no model request. Results of the
// latest turns (see [Request.KeepTurns]) are kept, and so are results no
// longer than MinBytes; a result's call, and whether it failed, are kept,
// so each call still has its result.
type Trim struct {
	// MinBytes is the size at or below which a result is kept as it is:
	// its stub would save nothing. 0 means 256.
	MinBytes int
}

var _ Strategy = Trim{}

// Compact implements [Strategy].
func (t Trim) Compact(_ context.Context, req *Request) (*Result, error) {
	min := t.MinBytes
	if min <= 0 {
		min = 256
	}
	msgs := req.Messages
	l := plan(msgs, req.KeepTurns)
	names := callNames(msgs[:l.tail])
	res := &Result{Messages: msgs}
	total := Estimate(msgs)
	cloned := false
	for i := l.head; i < l.tail && total > req.Target; i++ {
		if msgs[i].Role != llm.RoleTool {
			continue
		}
		var parts []llm.Part
		for j, p := range msgs[i].Parts {
			r := p.ToolResult
			if p.Kind != llm.PartToolResult || r == nil || isStub(r) {
				continue
			}
			size := 0
			for _, c := range r.Content {
				size += partBytes(c)
			}
			if size <= min {
				continue
			}
			if !cloned {
				res.Messages, cloned = slices.Clone(msgs), true
			}
			if parts == nil {
				parts = slices.Clone(msgs[i].Parts)
			}
			name := r.Name
			if name == "" {
				name = names[r.CallID]
			}
			stub := *r
			stub.Content = []llm.Part{llm.TextPart(fmt.Sprintf("%s the result of %s (call %s) was dropped to save context: %d bytes]",
				stubPrefix, name, r.CallID, contentBytes(r.Content)))}
			parts[j].ToolResult = &stub
			before := partBytes(p)
			after := partBytes(parts[j])
			total -= (before - after) / 4
			res.Trimmed++
			if total <= req.Target {
				break
			}
		}
		if parts != nil {
			res.Messages[i] = llm.Message{Role: msgs[i].Role, Parts: parts}
		}
	}
	if res.Trimmed > 0 {
		res.Strategy = "trim"
	}
	return res, nil
}

// stubPrefix starts the text of every stub, so that a stub is not trimmed
// again.
const stubPrefix = "[compacted:"

func isStub(r *llm.ToolResult) bool {
	return len(r.Content) == 1 && r.Content[0].Kind == llm.PartText && len(r.Content[0].Text) < 512 &&
		len(r.Content[0].Text) > len(stubPrefix) && r.Content[0].Text[:len(stubPrefix)] == stubPrefix
}

// contentBytes counts the bytes of a result's content: text, and media data.
func contentBytes(content []llm.Part) int {
	n := 0
	for _, p := range content {
		n += len(p.Text)
		if p.Media != nil {
			n += len(p.Media.Data)
		}
	}
	return n
}
