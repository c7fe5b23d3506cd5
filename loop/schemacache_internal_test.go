package loop

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestSchemaCache: the same bytes give the same compiled schema, other
// bytes another; an invalid schema is an error every time; the cache
// stays within its bounds.
func TestSchemaCache(t *testing.T) {
	a := json.RawMessage(`{"type":"object","properties":{"q":{"type":"string","default":"x"}}}`)
	r1, err := compileSchema(a)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := compileSchema(append(json.RawMessage(nil), a...))
	if err != nil || r2 != r1 {
		t.Errorf("the same schema compiled again = %p, %v; want the first, %p", r2, err, r1)
	}
	other, err := compileSchema(json.RawMessage(`{"type":"object","properties":{"q":{"type":"integer"}}}`))
	if err != nil || other == r1 {
		t.Errorf("another schema = %p, %v; want its own", other, err)
	}
	if err := other.Validate(map[string]any{"q": "text"}); err == nil {
		t.Error("the other schema validated the first one's argument")
	}
	for range 2 {
		if _, err := compileSchema(json.RawMessage(`{"type":"string"}`)); err == nil {
			t.Error("a schema that is not an object's compiled")
		}
	}
	big := json.RawMessage(`{"type":"object","description":"` + strings.Repeat("d", maxCachedSchema) + `"}`)
	b1, err1 := compileSchema(big)
	b2, err2 := compileSchema(big)
	if err1 != nil || err2 != nil || b1 == b2 {
		t.Errorf("a schema over the bound: %p, %p (%v, %v); want two compilations", b1, b2, err1, err2)
	}
	for i := range 2 * maxCachedSchemas {
		if _, err := compileSchema(json.RawMessage(fmt.Sprintf(`{"type":"object","title":"t%d"}`, i))); err != nil {
			t.Fatal(err)
		}
	}
	schemaCache.Lock()
	n := len(schemaCache.m)
	schemaCache.Unlock()
	if n > maxCachedSchemas {
		t.Errorf("the cache holds %d schemas, over its bound of %d", n, maxCachedSchemas)
	}
}
