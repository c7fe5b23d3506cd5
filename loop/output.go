package loop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/hrns-dev/hrns/llm"
)

// An OutputSchema requires a run's final answer to be a JSON value matching
// a JSON Schema. Set it in [Options.OutputSchema], or let [RunTyped] infer
// it from a Go type.
//
// The schema is sent with every model request as an [llm.ResponseFormat];
// each provider renders it with its own mechanism (see docs/providers.md).
// The loop validates the final answer itself, whatever the provider did:
// an answer that is not JSON or does not match is sent back to the model
// with the validation error, up to [Options.MaxOutputRetries] times, and
// then the run fails with an [*OutputError].
type OutputSchema struct {
	// Name names the answer for providers that want a name: 1 to 64
	// letters, digits, '_' or '-'. Empty means "final_answer".
	Name string
	// Description tells the model what the answer is for; optional.
	Description string
	// Schema is the JSON Schema of the answer (draft 2020-12).
	Schema json.RawMessage
}

// Check reports whether s is usable: a JSON Schema that resolves, and a
// valid name. The error wraps [ErrOutputSchema]. A run whose schema fails
// Check fails with that error before its first model request.
func (s *OutputSchema) Check() error {
	if s == nil {
		return nil
	}
	return newOutputCheck(s).err
}

// OutputSchemaFor returns the output schema of answers that decode into a
// T, inferred as for typed tools (see [NewTool]): field names from the json
// tags, descriptions from jsonschema tags, enum and default tags, and
// additionalProperties false on structs.
func OutputSchemaFor[T any]() (*OutputSchema, error) {
	t := reflect.TypeFor[T]()
	s, err := jsonschema.ForType(t, nil)
	if err != nil {
		return nil, fmt.Errorf("output schema for %v: %w", t, err)
	}
	if err := refine(t, s); err != nil {
		return nil, fmt.Errorf("output schema for %v: %w", t, err)
	}
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("output schema for %v: %w", t, err)
	}
	return &OutputSchema{Schema: raw}, nil
}

// ErrInvalidOutput is wrapped by every [*OutputError]: the final answer
// never matched the output schema.
var ErrInvalidOutput = errors.New("final answer does not match the output schema")

// ErrOutputSchema: the agent's [OutputSchema] is unusable (not a JSON
// Schema, or a bad name). A run with such a schema fails before its first
// model request.
var ErrOutputSchema = errors.New("invalid output schema")

// An OutputError ends a run whose final answer did not match its output
// schema, after the retries allowed by [Options.MaxOutputRetries] (or at
// once when a budget forced the answer). errors.Is(err, ErrInvalidOutput)
// holds for it.
type OutputError struct {
	// Answer is the model's last answer, as it wrote it.
	Answer string
	// Err says why it does not match: not JSON, or the validation error.
	Err error
	// Attempts counts the answers the model gave, the last one included.
	Attempts int
}

func (e *OutputError) Error() string {
	return fmt.Sprintf("%v after %d attempt(s): %v", ErrInvalidOutput, e.Attempts, e.Err)
}

// Unwrap returns [ErrInvalidOutput] and the validation error.
func (e *OutputError) Unwrap() []error { return []error{ErrInvalidOutput, e.Err} }

// defaultOutputName names an output schema that has no name.
const defaultOutputName = "final_answer"

// outputCheck is an agent's output schema, ready for requests and
// validation. err is set when the schema is unusable.
type outputCheck struct {
	format   *llm.ResponseFormat
	resolved *jsonschema.Resolved
	err      error
}

// newOutputCheck compiles s. A nil s means no schema: it returns nil.
func newOutputCheck(s *OutputSchema) *outputCheck {
	if s == nil {
		return nil
	}
	oc := &outputCheck{}
	name := s.Name
	if name == "" {
		name = defaultOutputName
	}
	if !validToolName(name) {
		oc.err = fmt.Errorf("%w: name %q must be 1 to 64 letters, digits, '_' or '-'", ErrOutputSchema, name)
		return oc
	}
	if err := checkSchemaDepth(s.Schema); err != nil {
		oc.err = fmt.Errorf("%w: %w", ErrOutputSchema, err)
		return oc
	}
	var schema jsonschema.Schema
	if err := json.Unmarshal(s.Schema, &schema); err != nil {
		oc.err = fmt.Errorf("%w: not a JSON Schema: %w", ErrOutputSchema, err)
		return oc
	}
	r, err := schema.Resolve(&jsonschema.ResolveOptions{ValidateDefaults: true})
	if err != nil {
		oc.err = fmt.Errorf("%w: %w", ErrOutputSchema, err)
		return oc
	}
	var doc any
	_ = json.Unmarshal(s.Schema, &doc) // valid: it decoded above
	oc.resolved = r
	oc.format = &llm.ResponseFormat{
		Name:        name,
		Description: s.Description,
		Schema:      append(json.RawMessage(nil), s.Schema...),
		Strict:      isObject(doc) && closedSchema(doc),
	}
	return oc
}

// isObject reports whether a decoded schema describes an object.
func isObject(doc any) bool {
	m, ok := doc.(map[string]any)
	if !ok {
		return false
	}
	t, _ := m["type"].(string)
	return t == "object"
}

// closedSchema reports whether every object schema in doc lists all its
// properties as required and sets additionalProperties to false: what
// providers require for strict (constrained) decoding.
func closedSchema(doc any) bool {
	switch v := doc.(type) {
	case []any:
		for _, e := range v {
			if !closedSchema(e) {
				return false
			}
		}
		return true
	case map[string]any:
	default:
		return true
	}
	m := doc.(map[string]any)
	props, hasProps := m["properties"].(map[string]any)
	if hasProps || hasType(m, "object") {
		if ap, ok := m["additionalProperties"].(bool); !ok || ap {
			return false
		}
		required := map[string]bool{}
		if rs, ok := m["required"].([]any); ok {
			for _, r := range rs {
				if s, ok := r.(string); ok {
					required[s] = true
				}
			}
		}
		for name := range props {
			if !required[name] {
				return false
			}
		}
	}
	for _, key := range []string{"properties", "$defs", "definitions", "patternProperties"} {
		if sub, ok := m[key].(map[string]any); ok {
			for _, s := range sub {
				if !closedSchema(s) {
					return false
				}
			}
		}
	}
	for _, key := range []string{"items", "prefixItems", "anyOf", "allOf", "oneOf", "not", "additionalProperties", "contains"} {
		if sub, ok := m[key]; ok {
			if !closedSchema(sub) {
				return false
			}
		}
	}
	return true
}

// hasType reports whether the schema m allows the JSON type t.
func hasType(m map[string]any, t string) bool {
	switch v := m["type"].(type) {
	case string:
		return v == t
	case []any:
		for _, e := range v {
			if e == t {
				return true
			}
		}
	}
	return false
}

// validate checks an answer against the schema. It returns the answer as
// a JSON value, without surrounding space or a Markdown code fence.
func (oc *outputCheck) validate(answer string) (string, error) {
	text := stripFence(answer)
	if text == "" {
		return "", errors.New("the answer is empty, not JSON")
	}
	var v any
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		return "", fmt.Errorf("the answer is not valid JSON: %w", err)
	}
	if err := oc.resolved.Validate(v); err != nil {
		return "", err
	}
	return text, nil
}

// stripFence trims space and one surrounding Markdown code fence
// (```json ... ```), which models sometimes put around JSON.
func stripFence(s string) string {
	s = strings.TrimSpace(s)
	if !strings.HasPrefix(s, "```") || !strings.HasSuffix(s, "```") || len(s) < 6 {
		return s
	}
	inner := s[3 : len(s)-3]
	nl := strings.IndexByte(inner, '\n')
	if nl < 0 {
		return s
	}
	if lang := strings.TrimSpace(inner[:nl]); lang != "" && lang != "json" && lang != "JSON" {
		return s
	}
	return strings.TrimSpace(inner[nl+1:])
}

// RunTyped runs the agent on messages with an output schema inferred from
// Out (see [OutputSchemaFor]), replacing the agent's own, and returns the
// final answer decoded into an Out, with the run's result. The error is the
// run's ([Result.Err]: an [*OutputError] when the answer never matched), or
// the schema's inference error.
//
// It is a function, not a method, because Go methods cannot take type
// parameters; the agent itself is not changed and can serve other types.
func RunTyped[Out any](ctx context.Context, a *Agent, messages []llm.Message) (Out, *Result, error) {
	var out Out
	s, err := OutputSchemaFor[Out]()
	if err != nil {
		return out, nil, fmt.Errorf("%w: %w", ErrOutputSchema, err)
	}
	b := *a
	b.opts.OutputSchema = s
	b.output = newOutputCheck(s)
	res, err := b.Run(ctx, messages)
	if err != nil {
		return out, res, err
	}
	if err := json.Unmarshal([]byte(res.Answer), &out); err != nil {
		return out, res, fmt.Errorf("decoding the final answer into %T: %w", out, err)
	}
	return out, res, nil
}
