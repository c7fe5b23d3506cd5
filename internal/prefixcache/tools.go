package prefixcache

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/hrns-dev/hrns/llm"
)

// Tools keeps the encoded "tools" field of a conversation's last request
// with copies of what it was rendered from, so that a turn whose tools
// are the same (the loop sends the same tools every turn) neither renders
// nor encodes them again: rendering re-reads every schema, and encoding
// compacts it. The field depends on the specs' names, descriptions,
// schema bytes and computer screens, in their order (a caller may rewrite
// a schema or a screen in place), and on extra, whatever else of the
// request a provider renders the field from (its model, its strictness),
// in a string. A provider keeps one in each conversation, under a key of
// its own (see [ToolsOf]); the tool choice goes in a field of its own.
type Tools struct {
	mu        sync.Mutex
	specs     []llm.ToolSpec
	schemas   []byte             // the specs' schemas, one after the other
	computers []llm.ComputerSpec // copies of the specs' computers, in their order
	extra     string
	field     []byte // `,"tools":[…]`, never written again once returned
}

// ToolsOf returns the Tools conv keeps under key, made at first use; a
// nil conv gets a new one. key is a provider's own type, so that no two
// providers share one.
func ToolsOf(conv *llm.Conversation, key any) *Tools {
	return conv.State(key, func() any { return new(Tools) }).(*Tools)
}

// Kept returns the "tools" field kept for specs and extra, or nil if the
// kept one was rendered from others (or none was).
func (t *Tools) Kept(specs []llm.ToolSpec, extra string) []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.field != nil && t.same(specs, extra) {
		return t.field
	}
	return nil
}

// Encode returns the "tools" field, after a comma, of a request whose
// tools are specs and extra, rendered as wire: byte for byte what encoding
// the request with wire in its tools gives there (encoding/json, HTML
// escaping off). It keeps the field for [Tools.Kept]; provider names the
// provider in an error.
func (t *Tools) Encode(provider string, specs []llm.ToolSpec, extra string, wire any) ([]byte, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.field != nil && t.same(specs, extra) {
		return t.field, nil
	}
	var buf bytes.Buffer
	buf.WriteString(`,"tools":`)
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(wire); err != nil {
		return nil, fmt.Errorf("%s: encoding request: %w", provider, err)
	}
	t.field = bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	t.field = t.field[:len(t.field):len(t.field)]
	t.specs = append(t.specs[:0], specs...)
	t.schemas, t.computers = t.schemas[:0], t.computers[:0]
	for i := range specs {
		t.schemas = append(t.schemas, specs[i].InputSchema...)
		if c := specs[i].Computer; c != nil {
			t.computers = append(t.computers, *c)
		}
	}
	t.extra = extra
	return t.field, nil
}

// same reports whether specs and extra render as the kept ones.
func (t *Tools) same(specs []llm.ToolSpec, extra string) bool {
	if len(specs) != len(t.specs) || extra != t.extra {
		return false
	}
	at, comp := 0, 0
	for i := range specs {
		s, k := &specs[i], &t.specs[i]
		if s.Name != k.Name || s.Description != k.Description || len(s.InputSchema) != len(k.InputSchema) ||
			!bytes.Equal(s.InputSchema, t.schemas[at:at+len(s.InputSchema)]) ||
			(s.Computer == nil) != (k.Computer == nil) {
			return false
		}
		at += len(s.InputSchema)
		if s.Computer != nil {
			if *s.Computer != t.computers[comp] {
				return false
			}
			comp++
		}
	}
	return true
}
