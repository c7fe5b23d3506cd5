package openai

import (
	"cmp"
	"encoding/json"
	"math"
	"slices"
	"strconv"

	"github.com/hrns-dev/hrns/llm"
)

// accumulator assembles streamed tool-call deltas into calls.
//
// Chat Completions keys the deltas of a call by "index" and sends the call's
// id and name on its first delta only. Compatible servers deviate, and the
// accumulator attributes each delta as follows:
//
//   - With an id, a delta continues the call with that id: some servers
//     reuse index 0 for every call, interleave their deltas and tell calls
//     apart by the id they repeat on every delta. A new id starts a new
//     call, even on an index already used, unless the latest call of that
//     index has no id yet: then the id came late, and is the call's. (Two
//     calls of different indexes that share an id stay apart.)
//   - With an index but no id, it continues the call its index last went
//     to, or starts one.
//   - With neither, it continues the call the previous delta went to,
//     unless it names a tool while that call is already named and either
//     the names differ or the call's arguments are complete JSON: servers
//     that omit both send each call whole.
//
// An empty id counts as no id. A call is announced (and numbered, in the
// Index of its chunks) when its name or first arguments arrive; a call that
// never gets either is dropped. Calls without an id get "call_<n>", and ids
// are made unique within the response, so that results can always be
// matched to calls.
//
// The response lists the calls by the server's index, calls of the same
// index in the order they arrived; a call without an index keeps its place
// after the call that arrived before it. This is the announcement order
// unless a server sends a lower index after a higher one (or a call's name
// and arguments come after those of a call that arrived later). An id that
// comes late is the call's id in the response (made unique among all the
// ids announced), though its chunks were announced under the generated one.
//
// The server's numbers are only compared and used as map keys, never to size
// or index anything, so a negative or huge index costs nothing.
type accumulator struct {
	all     []*toolCallState          // in order of first delta
	byID    map[string]*toolCallState // the latest call of each server id
	byIndex map[int]*toolCallState    // the call each server index last went to
	// byIDIndex holds the calls with both an id and an index.
	byIDIndex map[idIndex]*toolCallState
	last      *toolCallState  // the call the previous delta went to
	ids       map[string]bool // the ids announced
	started   int             // the number of calls announced
}

// idIndex is a server's id and index of a call.
type idIndex struct {
	id    string
	index int
}

// toolCallState is one call being assembled.
type toolCallState struct {
	index      int  // the server's index, if hasIndex
	hasIndex   bool // a delta of the call had an index
	providerID string
	name       string
	args       []byte
	pos        int    // position among announced calls, or -1
	id         string // the id announced
	lateID     bool   // providerID came after the call was announced
}

// add attributes one delta to its call and appends the chunks it produces.
func (a *accumulator) add(d *toolCallDelta, out []llm.Chunk) []llm.Chunk {
	if a.byID == nil {
		a.byID = make(map[string]*toolCallState)
		a.byIndex = make(map[int]*toolCallState)
		a.byIDIndex = make(map[idIndex]*toolCallState)
		a.ids = make(map[string]bool)
	}
	c := a.target(d)
	a.last = c
	if d.Index.ok {
		a.byIndex[d.Index.v] = c
		if !c.hasIndex {
			c.index, c.hasIndex = d.Index.v, true
		}
		if c.providerID != "" {
			a.byIDIndex[idIndex{c.providerID, c.index}] = c
		}
	}
	if c.name == "" {
		c.name = d.Function.Name
	}
	args := d.Function.Arguments
	if c.pos < 0 && (c.name != "" || args != "") {
		c.pos = a.started
		a.started++
		c.id = a.uniqueID(c.providerID, c.pos)
		a.ids[c.id] = true
		out = append(out, llm.Chunk{Kind: llm.ChunkToolCallStart, Index: c.pos, ID: c.id, Name: c.name})
	}
	if args != "" {
		c.args = append(c.args, args...)
		out = append(out, llm.Chunk{Kind: llm.ChunkToolCallDelta, Index: c.pos, Text: args})
	}
	return out
}

// target returns the call d belongs to, creating it if needed.
func (a *accumulator) target(d *toolCallDelta) *toolCallState {
	id := d.ID
	if id != "" {
		if d.Index.ok {
			if c := a.byIDIndex[idIndex{id, d.Index.v}]; c != nil {
				return c
			}
		}
		if c := a.byID[id]; c != nil && (!d.Index.ok || !c.hasIndex) {
			return c
		}
		if d.Index.ok {
			if c := a.byIndex[d.Index.v]; c != nil && c.providerID == "" {
				// The id came late.
				c.providerID = id
				c.lateID = c.pos >= 0
				a.byID[id] = c
				return c
			}
		}
		return a.newCall(id)
	}
	if d.Index.ok {
		if c := a.byIndex[d.Index.v]; c != nil {
			return c
		}
		return a.newCall("")
	}
	if last := a.last; last != nil {
		name := d.Function.Name
		if name == "" || last.name == "" ||
			(name == last.name && !(len(last.args) > 0 && json.Valid(last.args))) {
			return last
		}
	}
	return a.newCall("")
}

// newCall appends a call with the server's id, if any.
func (a *accumulator) newCall(providerID string) *toolCallState {
	c := &toolCallState{providerID: providerID, pos: -1}
	a.all = append(a.all, c)
	if providerID != "" {
		a.byID[providerID] = c
	}
	return c
}

// uniqueID returns the id to give out for the call announced at pos: the
// server's id, or call_<pos> without one, made unique among announced calls.
func (a *accumulator) uniqueID(providerID string, pos int) string {
	base := providerID
	if base == "" {
		base = "call_" + strconv.Itoa(pos)
	}
	id := base
	for n := 2; a.ids[id]; n++ {
		id = base + "_" + strconv.Itoa(n)
	}
	return id
}

// calls returns the announced calls in the order of the server's indexes.
// Empty arguments become "{}" so that every call carries a JSON object.
func (a *accumulator) calls() []*llm.ToolCall {
	if a.started == 0 {
		return nil
	}
	type entry struct {
		c   *toolCallState
		key int // the sort key: the index, or the key of the call before
	}
	order := make([]entry, 0, a.started)
	key := math.MinInt
	for _, c := range a.all {
		if c.hasIndex {
			key = c.index
		}
		if c.pos >= 0 {
			order = append(order, entry{c, key})
		}
	}
	slices.SortStableFunc(order, func(x, y entry) int { return cmp.Compare(x.key, y.key) })

	// A late id replaces the generated one, made unique among every id
	// announced and the late ids given before it: an id of the response
	// that was announced is always the same call's.
	for _, c := range a.all {
		if c.lateID {
			c.id = c.providerID
			for n := 2; a.ids[c.id]; n++ {
				c.id = c.providerID + "_" + strconv.Itoa(n)
			}
			a.ids[c.id] = true
			c.lateID = false
		}
	}

	out := make([]*llm.ToolCall, len(order))
	for i, e := range order {
		c := e.c
		args := c.args
		if len(args) == 0 {
			args = []byte("{}")
		}
		out[i] = &llm.ToolCall{ID: c.id, Name: c.name, Arguments: args}
	}
	return out
}
