package server_test

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store"
	"github.com/hrns-dev/hrns/store/postgres"
	"github.com/hrns-dev/hrns/store/postgres/postgrestest"
)

// TestToolResultWithNUL: a client tool's output may hold the NUL
// character (a binary file read as text): it is kept in the session's
// events and transcript as JSON, which both stores hold, so the result is
// taken and reaches the model as written, on SQLite as on PostgreSQL. Only
// text the stores keep as text (a message, names, descriptions, ids) is
// refused with a NUL (TestUnstorableTextRefused).
func TestToolResultWithNUL(t *testing.T) {
	for _, name := range []string{"sqlite", "postgres"} {
		t.Run(name, func(t *testing.T) {
			var o *envOptions
			if name == "postgres" {
				pg, err := postgres.Open(t.Context(), postgrestest.DSN(t), &postgres.Options{MaxConns: 4})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { pg.Close() })
				o = &envOptions{wrap: func(store.Store) store.Store { return pg }}
			}
			sawNUL := make(chan bool, 1)
			e := newEnv(t, o,
				calls(openaitest.ToolCall("call_1", "get_order_status", `{"order_id":"4242"}`)),
				openaitest.Reply{Func: func(req []byte) openaitest.Reply {
					sawNUL <- bytes.Contains(req, []byte(`bin\u0000ary`))
					return openaitest.Reply{Text: "read it"}
				}})
			id := e.create(keyAlice, orderAgent)
			f := e.follow(keyAlice, id)
			f.status(session.StatusAwaitingToolResults)
			result := `{"kind":"tool_result","tool_req":{"tool_name":"get_order_status","args":{"order_id":"4242"},"id":"call_1"},"result":"bin\u0000ary"}`
			e.expect(e.do("POST", "/api/v2/sessions/"+id+"/tool_results", keyAlice, result), http.StatusAccepted)
			f.status(session.StatusCompleted)
			if !<-sawNUL {
				t.Error("the model's next request did not hold the result as posted (bin\\u0000ary)")
			}
		})
	}
}
