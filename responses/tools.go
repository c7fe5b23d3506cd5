package responses

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/hrns-dev/hrns/llm"
)

// toolsKey is the key of a conversation's [toolsCache] in its
// [llm.Conversation].
type toolsKey struct{}

// toolsCache keeps the encoded "tools" field of a conversation's last
// request with what it was rendered from, so that a turn whose tools are
// the same (the loop sends the same tools every turn) neither renders them
// again (see [strictSchema], two thirds of a turn's allocations) nor
// encodes them. The field depends on the specs (their names, descriptions,
// schema bytes and computer screens, in their order), on strictness
// ([Client.NoStrict]) and on the model (which computer tool it takes);
// the tool choice is rendered at every request into its own field.
type toolsCache struct {
	mu        sync.Mutex
	specs     []llm.ToolSpec
	schemas   []byte             // the specs' schemas, one after the other
	computers []llm.ComputerSpec // copies of the specs' computers, in their order
	strict    bool
	model     string

	field    []byte // `,"tools":[…]`, never written again once returned
	computer bool   // a tool is computer_use_preview: truncation "auto"
}

// toolsFor returns the tools cache of conv.
func toolsFor(conv *llm.Conversation) *toolsCache {
	return conv.State(toolsKey{}, func() any { return new(toolsCache) }).(*toolsCache)
}

// kept returns the "tools" field kept for specs rendered with strict for
// model, and whether a tool is computer_use_preview; nil if the kept one
// was rendered from others (or none was).
func (t *toolsCache) kept(specs []llm.ToolSpec, strict bool, model string) ([]byte, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.field != nil && t.same(specs, strict, model) {
		return t.field, t.computer
	}
	return nil, false
}

// encode returns the "tools" field, after a comma, of a request whose
// tools are specs, rendered with strict for model as wire: byte for byte
// what encoding the request with wire in its Tools gives there
// (encoding/json, HTML escaping off).
func (t *toolsCache) encode(specs []llm.ToolSpec, strict bool, model string, wire []tool) ([]byte, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.field != nil && t.same(specs, strict, model) {
		return t.field, nil
	}
	var buf bytes.Buffer
	buf.WriteString(`,"tools":`)
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(wire); err != nil {
		return nil, fmt.Errorf("%s: encoding request: %w", providerName, err)
	}
	t.field = bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	t.field = t.field[:len(t.field):len(t.field)]
	t.computer = false
	for i := range wire {
		if wire[i].Type == "computer_use_preview" {
			t.computer = true
		}
	}
	t.specs = append(t.specs[:0], specs...)
	t.schemas, t.computers = t.schemas[:0], t.computers[:0]
	for i := range specs {
		t.schemas = append(t.schemas, specs[i].InputSchema...)
		if c := specs[i].Computer; c != nil {
			t.computers = append(t.computers, *c)
		}
	}
	t.strict, t.model = strict, model
	return t.field, nil
}

// same reports whether specs render with strict for model as the kept
// ones: the same strictness and model, names, descriptions, schema bytes
// and computer screens (a caller may rewrite a schema or a screen in
// place). Nothing else reaches the "tools" field (see [renderTools]).
func (t *toolsCache) same(specs []llm.ToolSpec, strict bool, model string) bool {
	if len(specs) != len(t.specs) || strict != t.strict || model != t.model {
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
