package api_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hrns-dev/hrns/api"
)

func ExampleRequest() {
	body := `{"agent": "h/web-surfer", "messages": "Find the opening hours of the city library."}`
	var req api.Request
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(req.Agent.Name, len(req.Messages), req.Messages[0].Message)
	// Output: h/web-surfer 1 Find the opening hours of the city library.
}

// TestMessagesForms: the initial task may be a string, one message or a
// list; anything else is refused with a clear error.
func TestMessagesForms(t *testing.T) {
	one := api.Messages{{Type: "user_message", Message: "hi"}}
	tests := []struct {
		body    string
		want    api.Messages
		wantErr bool
	}{
		{body: `"hi"`, want: one},
		{body: `{"type":"user_message","message":"hi"}`, want: one},
		{body: `[{"type":"user_message","message":"hi"}]`, want: one},
		{body: `null`},
		{body: `42`, wantErr: true},
		{body: `[42]`, wantErr: true},
	}
	for _, tc := range tests {
		var got api.Messages
		err := json.Unmarshal([]byte(tc.body), &got)
		if (err != nil) != tc.wantErr {
			t.Errorf("%s: err = %v, want error %v", tc.body, err, tc.wantErr)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.body, diff)
		}
	}
}

// FuzzRequest feeds arbitrary bodies to the request decoder: it never
// panics, and what it accepts encodes to a body that decodes to the same
// request.
func FuzzRequest(f *testing.F) {
	for _, seed := range []string{
		`{"agent":"h/web-surfer","messages":"hi"}`,
		`{"agent":{"name":"a","tools":[{"name":"t","description":"d","input_schema":{"type":"object"}}],"environments":["web",{"kind":"web","id":"w"}],"skills":["s",{"name":"x","body":"b"}]},"messages":[{"type":"user_message","message":"m"}],"max_steps":3,"idle_timeout_s":10}`,
		`{"agent":{"environments":[1]}}`,
		`{"messages":{"message":"x"}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var req api.Request
		if json.Unmarshal(body, &req) != nil {
			return
		}
		b, err := json.Marshal(req)
		if err != nil {
			return // raw JSON fields the decoder kept as given may not re-encode
		}
		var again api.Request
		if err := json.Unmarshal(b, &again); err != nil {
			t.Fatalf("%s encodes to %s, which does not decode: %v", body, b, err)
		}
		b2, err := json.Marshal(again)
		if err != nil || string(b2) != string(b) {
			t.Fatalf("not stable: %s then %s (%v)", b, b2, err)
		}
	})
}
