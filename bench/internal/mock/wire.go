package mock

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// head opens every chunk, with the fields OpenAI sends on each.
const head = `{"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1754000000,"model":"bench-model","service_tier":"default","system_fingerprint":"fp_bench",`

// usage is the last chunk before [DONE]: no choices, the run's usage.
const usage = `"choices":[],"usage":{"prompt_tokens":412,"completion_tokens":96,"total_tokens":508,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}`

// builder collects the events of one body.
type builder struct{ events [][]byte }

// choice adds a chunk whose only choice is inner (the fields after index).
func (b *builder) choice(inner string) {
	b.chunk(`"choices":[{"index":0,` + inner + `}],"usage":null`)
}

// chunk adds a chunk whose fields after the head are rest.
func (b *builder) chunk(rest string) {
	b.events = append(b.events, []byte("data: "+head+rest+"}\n\n"))
}

func (b *builder) stream() Stream {
	b.events = append(b.events, []byte("data: [DONE]\n\n"))
	return Stream{Whole: bytes.Join(b.events, nil), Events: b.events}
}

// A Stream is a rendered answer: the body of a streamed chat completion.
type Stream struct {
	// Whole is the body.
	Whole []byte
	// Events are the events of the body, each with its blank line; the
	// last is [DONE].
	Events [][]byte
}

// Chunks returns the number of chat.completion.chunk events of s.
func (s Stream) Chunks() int { return len(s.Events) - 1 }

// ToolCallStream renders a stream of one call of name with id, whose arguments
// args are split over n deltas (fewer if args is shorter than n bytes).
func ToolCallStream(id, name, args string, n int) Stream {
	return ToolCallsStream([]Call{{ID: id, Name: name, Args: args}}, n)
}

// A Call is one call of a [ToolCallsStream].
type Call struct{ ID, Name, Args string }

// ToolCallsStream renders a stream of the calls, one after the other at
// stream indices 0, 1, ..., as OpenAI streams parallel calls: each call's
// arguments split over n deltas (fewer if they are shorter than n bytes).
func ToolCallsStream(calls []Call, n int) Stream {
	var b builder
	b.choice(`"delta":{"role":"assistant","content":null,"refusal":null},"logprobs":null,"finish_reason":null`)
	for i, c := range calls {
		b.choice(fmt.Sprintf(`"delta":{"tool_calls":[{"index":%d,"id":%q,"type":"function","function":{"name":%q,"arguments":""}}]},"logprobs":null,"finish_reason":null`, i, c.ID, c.Name))
		for _, part := range splitN(c.Args, n) {
			b.choice(fmt.Sprintf(`"delta":{"tool_calls":[{"index":%d,"function":{"arguments":%s}}]},"logprobs":null,"finish_reason":null`, i, quote(part)))
		}
	}
	b.choice(`"delta":{},"logprobs":null,"finish_reason":"tool_calls"`)
	b.chunk(usage)
	return b.stream()
}

// JSONText returns deltas whose concatenation is the JSON string of the
// concatenation of text, as many: a structured answer made of a string.
// Each delta is the quoted form of its text, the first with the opening
// quote, the last with the closing one.
func JSONText(text []string) []string {
	out := make([]string, len(text))
	for i, t := range text {
		q := quote(t)
		q = q[1 : len(q)-1]
		if i == 0 {
			q = `"` + q
		}
		if i == len(text)-1 {
			q += `"`
		}
		out[i] = q
	}
	return out
}

// TextStream renders a stream of a final answer made of the given content
// deltas.
func TextStream(deltas []string) Stream {
	var b builder
	b.choice(`"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null`)
	for _, d := range deltas {
		b.choice(`"delta":{"content":` + quote(d) + `},"logprobs":null,"finish_reason":null`)
	}
	b.choice(`"delta":{},"logprobs":null,"finish_reason":"stop"`)
	b.chunk(usage)
	return b.stream()
}

// words make up the final answer, a few per delta as a model streams tokens.
var words = strings.Fields("the notes say that the service listens on port 8080 keeps its state in SQLite " +
	"logs to standard error in JSON and restarts itself when its configuration changes")

// FinalText returns the n content deltas of the final answer: about three
// words each, some with characters JSON escapes, as model output has.
func FinalText(n int) []string {
	out := make([]string, n)
	for i := range out {
		w := words[3*i%len(words)] + " " + words[(3*i+1)%len(words)] + " " + words[(3*i+2)%len(words)]
		switch i % 10 {
		case 4:
			w += ",\n"
		case 9:
			w = `"` + w + `". `
		default:
			w += " "
		}
		out[i] = w
	}
	return out
}

// splitN cuts s into n pieces of nearly equal length, or len(s) pieces if
// s is shorter.
func splitN(s string, n int) []string {
	n = min(n, len(s))
	out := make([]string, 0, n)
	for i := range n {
		out = append(out, s[i*len(s)/n:(i+1)*len(s)/n])
	}
	return out
}

func quote(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err) // a string always marshals
	}
	return string(b)
}
