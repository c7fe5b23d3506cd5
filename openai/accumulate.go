package openai

import (
	"encoding/json"
	"strconv"

	"github.com/hrns-dev/hrns/llm"
)

// accumulator assembles streamed tool-call deltas into calls.
//
// Chat Completions keys the deltas of a call by "index" and sends the call's
// id and name on its first delta only. Compatible servers deviate, and the
// accumulator attributes each delta as follows:
//
//   - With an index, a delta continues the latest call with that index,
//     unless both carry ids and they differ: some servers reuse index 0 for
//     every call and tell calls apart by id only.
//   - Without an index but with an id, it continues the call with that id,
//     or starts a new one.
//   - With neither, it continues the latest call, unless it names a tool
//     while the latest call is already named and either the names differ or
//     the latest call's arguments are complete JSON: servers that omit both
//     send each call whole.
//
// An empty id counts as no id. A call is announced (and numbered) when its
// name or first arguments arrive; a call that never gets either is dropped.
// Calls without an id get "call_<n>", and ids are made unique within the
// response, so that results can always be matched to calls.
type accumulator struct {
	all     []toolCallState // in order of first delta
	started []int           // indexes into all, in order of announcement
}

// toolCallState is one call being assembled.
type toolCallState struct {
	index      int  // the server's index, if hasIndex
	hasIndex   bool // the call was created by a delta with an index
	providerID string
	name       string
	args       []byte
	pos        int    // position among announced calls, or -1
	id         string // the id given out, once announced
}

// add attributes one delta to its call and appends the chunks it produces.
func (a *accumulator) add(d *toolCallDelta, out []llm.Chunk) []llm.Chunk {
	i := a.target(d)
	c := &a.all[i]
	if c.name == "" {
		c.name = d.Function.Name
	}
	args := d.Function.Arguments
	if c.pos < 0 && (c.name != "" || args != "") {
		c.pos = len(a.started)
		c.id = a.uniqueID(c.providerID, c.pos)
		a.started = append(a.started, i)
		out = append(out, llm.Chunk{Kind: llm.ChunkToolCallStart, Index: c.pos, ID: c.id, Name: c.name})
	}
	if args != "" {
		c.args = append(c.args, args...)
		out = append(out, llm.Chunk{Kind: llm.ChunkToolCallDelta, Index: c.pos, Text: args})
	}
	return out
}

// target returns the index in a.all of the call d belongs to, creating the
// call if needed.
func (a *accumulator) target(d *toolCallDelta) int {
	id := d.ID
	if d.Index.ok {
		if i := a.latest(d.Index.v); i >= 0 {
			c := &a.all[i]
			switch {
			case id == "" || id == c.providerID:
				return i
			case c.providerID == "":
				// The id came late. Keep the generated one if the call
				// was already announced.
				c.providerID = id
				return i
			}
			// A new id on a reused index: a new call.
		}
		return a.newCall(d.Index.v, true, id)
	}
	if id != "" {
		for i := len(a.all) - 1; i >= 0; i-- {
			if a.all[i].providerID == id {
				return i
			}
		}
		return a.newCall(0, false, id)
	}
	if n := len(a.all); n > 0 {
		last := &a.all[n-1]
		name := d.Function.Name
		if name == "" || last.name == "" ||
			(name == last.name && !(len(last.args) > 0 && json.Valid(last.args))) {
			return n - 1
		}
	}
	return a.newCall(0, false, "")
}

// newCall appends a call and returns its index in a.all.
func (a *accumulator) newCall(index int, hasIndex bool, providerID string) int {
	a.all = append(a.all, toolCallState{index: index, hasIndex: hasIndex, providerID: providerID, pos: -1})
	return len(a.all) - 1
}

// latest returns the index in a.all of the latest call created with the
// server's index, or -1.
func (a *accumulator) latest(index int) int {
	for i := len(a.all) - 1; i >= 0; i-- {
		if c := &a.all[i]; c.hasIndex && c.index == index {
			return i
		}
	}
	return -1
}

// uniqueID returns the id to give out for the call announced at pos: the
// server's id, or call_<pos> without one, made unique among announced calls.
func (a *accumulator) uniqueID(providerID string, pos int) string {
	base := providerID
	if base == "" {
		base = "call_" + strconv.Itoa(pos)
	}
	id := base
	for n := 2; a.idTaken(id); n++ {
		id = base + "_" + strconv.Itoa(n)
	}
	return id
}

func (a *accumulator) idTaken(id string) bool {
	for _, i := range a.started {
		if a.all[i].id == id {
			return true
		}
	}
	return false
}

// calls returns the announced calls in order. Empty arguments become "{}" so
// that every call carries a JSON object.
func (a *accumulator) calls() []*llm.ToolCall {
	if len(a.started) == 0 {
		return nil
	}
	out := make([]*llm.ToolCall, len(a.started))
	for pos, i := range a.started {
		c := &a.all[i]
		args := llm.Arguments(c.args)
		if len(args) == 0 {
			args = llm.Arguments("{}")
		}
		out[pos] = &llm.ToolCall{ID: c.id, Name: c.name, Arguments: args}
	}
	return out
}
