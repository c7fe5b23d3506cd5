package server_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
)

// The contract: testdata/contract holds a copy of the schemas of the Agents
// API reference that hrns implements (schemas*.json, JSON Schema 2020-12,
// references into $defs) and its operations with the schema of each
// response status (operations*.json). Every server the tests start is
// wrapped in contractHandler, which validates every JSON response body of
// a documented operation and status against its schema and fails the test
// that got a body that does not validate. TestMain then checks that each
// operation hrns implements had a success body validated.

// operation is one documented operation: the schema of each response
// status, "" for a status without a body.
type operation struct {
	OperationID string             `json:"operationId"`
	Responses   map[string]*string `json:"responses"`
}

type contractDoc struct {
	mux     *http.ServeMux // method and path pattern -> operation key
	ops     map[string]operation
	schemas map[string]*jsonschema.Resolved // $defs name -> resolved schema

	mu        sync.Mutex
	validated map[string]int // operation -> success bodies validated
}

var (
	contractOnce sync.Once
	contract     *contractDoc
	contractErr  error
)

func loadContract() (*contractDoc, error) {
	contractOnce.Do(func() { contract, contractErr = readContract("testdata/contract") })
	return contract, contractErr
}

func readContract(dir string) (*contractDoc, error) {
	c := &contractDoc{mux: http.NewServeMux(), ops: map[string]operation{}, schemas: map[string]*jsonschema.Resolved{}, validated: map[string]int{}}
	defs := map[string]*jsonschema.Schema{}
	files, _ := filepath.Glob(filepath.Join(dir, "schemas*.json"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var doc jsonschema.Schema
		if err := json.Unmarshal(b, &doc); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		maps.Copy(defs, doc.Defs)
	}
	files, _ = filepath.Glob(filepath.Join(dir, "operations*.json"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var ops map[string]operation
		if err := json.Unmarshal(b, &ops); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		maps.Copy(c.ops, ops)
	}
	if len(defs) == 0 || len(c.ops) == 0 {
		return nil, fmt.Errorf("no schemas or operations in %s", dir)
	}
	for key, op := range c.ops {
		c.mux.HandleFunc(key, func(http.ResponseWriter, *http.Request) {})
		for _, name := range op.Responses {
			if name == nil || c.schemas[*name] != nil {
				continue
			}
			root := &jsonschema.Schema{Schema: "https://json-schema.org/draft/2020-12/schema", Ref: "#/$defs/" + *name, Defs: defs}
			r, err := root.Resolve(nil)
			if err != nil {
				return nil, fmt.Errorf("schema %s: %w", *name, err)
			}
			c.schemas[*name] = r
		}
	}
	return c, nil
}

// check validates one response; it returns an error for a body that does
// not validate against its operation's schema for the status.
func (c *contractDoc) check(r *http.Request, status int, header http.Header, body []byte) error {
	_, pattern := c.mux.Handler(r)
	op, ok := c.ops[pattern]
	if !ok {
		return nil // not an operation of the reference (an hrns addition)
	}
	name, documented := op.Responses[strconv.Itoa(status)]
	if !documented {
		return nil // a status the reference does not describe (401, 404, 409, 429...)
	}
	if name == nil {
		// No JSON schema: no body, or bytes that are not JSON (the
		// resources operation answers application/octet-stream).
		// An error the reference gives no schema for may say why, in
		// hrns's {"detail"} shape.
		if mt, _, _ := mime.ParseMediaType(header.Get("Content-Type")); status < 400 && len(bytes.TrimSpace(body)) > 0 && mt == "application/json" {
			return fmt.Errorf("%s answered %d with a body, the reference has none: %s", pattern, status, excerpt(body))
		}
		c.count(pattern, status)
		return nil
	}
	if mt, _, _ := mime.ParseMediaType(header.Get("Content-Type")); mt != "application/json" {
		return fmt.Errorf("%s answered %d with Content-Type %q, want application/json", pattern, status, header.Get("Content-Type"))
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return fmt.Errorf("%s answered %d with invalid JSON: %v", pattern, status, err)
	}
	if err := c.schemas[*name].Validate(v); err != nil {
		return fmt.Errorf("%s answered %d with a body that is not a valid %s: %v\nbody: %s", pattern, status, *name, err, excerpt(body))
	}
	c.count(pattern, status)
	return nil
}

func (c *contractDoc) count(pattern string, status int) {
	if status >= 300 {
		return
	}
	c.mu.Lock()
	c.validated[pattern]++
	c.mu.Unlock()
}

func excerpt(b []byte) string {
	if len(b) > 2000 {
		return string(b[:2000]) + "..."
	}
	return string(b)
}

// contractHandler validates the responses of h (see above), reporting
// failures to t.
func contractHandler(t testing.TB, h http.Handler) http.Handler {
	c, err := loadContract()
	if err != nil {
		t.Fatalf("contract: %v", err)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
			h.ServeHTTP(w, r) // a stream (an hrns addition) is not a body of the reference
			return
		}
		rec := &recorder{ResponseWriter: w}
		h.ServeHTTP(rec, r)
		if rec.status == 0 && rec.body.Len() == 0 && r.Context().Err() != nil {
			return // the client went away: nothing was answered
		}
		if rec.status == 0 {
			rec.status = http.StatusOK
		}
		if err := c.check(r, rec.status, w.Header(), rec.body.Bytes()); err != nil {
			t.Errorf("contract: %s %s: %v", r.Method, r.URL, err)
		}
	})
}

// recorder passes a response through and keeps a copy of its body.
type recorder struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	r.body.Write(b)
	return r.ResponseWriter.Write(b)
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// notImplemented are the operations of the contract files that hrns does
// not serve (docs/sessions-api.md says why): TestMain does not require a
// validated body of them.
var notImplemented = []string{}

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if code == 0 && flag.Lookup("test.run").Value.String() == "" && !testing.Short() {
		// The whole package ran: every implemented operation of the
		// reference must have had a success body validated.
		c, err := loadContract()
		if err != nil {
			fmt.Fprintln(os.Stderr, "contract:", err)
			os.Exit(1)
		}
		var missing []string
		for _, key := range slices.Sorted(maps.Keys(c.ops)) {
			if c.validated[key] == 0 && !slices.Contains(notImplemented, key) {
				missing = append(missing, key)
			}
		}
		if len(missing) > 0 {
			fmt.Fprintf(os.Stderr, "contract: no test validated a success response of:\n\t%s\n", strings.Join(missing, "\n\t"))
			code = 1
		}
	}
	os.Exit(code)
}

// TestContractSchemas checks the validator itself: a body the reference
// allows validates, one it does not is refused.
func TestContractSchemas(t *testing.T) {
	c, err := loadContract()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		schema string
		body   string
		ok     bool
	}{
		{"QuotaStatus", `{"scope":"user","limit":4,"active":1,"available":3}`, true},
		{"QuotaStatus", `{"scope":"team","limit":4,"active":1,"available":3}`, false},
		{"SessionStatus", `{"status":"running","steps":0}`, true},
		{"SessionStatus", `{"status":"walking"}`, false},
		{"Session", `{"id":"6f1c2a0e-1b2c-4d3e-8f90-123456789abc","request":{"agent":"a"},"status":{"status":"queued"},"created_at":"2026-01-01T00:00:00Z"}`, true},
		{"Session", `{"id":"6f1c2a0e-1b2c-4d3e-8f90-123456789abc","request":{"agent":"a"},"status":{"status":"queued"},"created_at":"2026-01-01T00:00:00Z","lease":{}}`, false},
		{"Session", `{"id":"6f1c2a0e-1b2c-4d3e-8f90-123456789abc","request":{"agent":{"name":"a","environments":[]}},"status":{"status":"queued"},"created_at":"2026-01-01T00:00:00Z"}`, false},
		{"HTTPValidationError", `{"detail":[{"loc":["body","agent"],"msg":"Field required","type":"missing"}]}`, true},
		{"HTTPValidationError", `{"detail":"nope"}`, false},
		{"SessionChanges", `{"status":"running","new_events":[{"type":"AgentEvent","data":{"kind":"answer_event","answer":{"x":1}},"timestamp":"2026-01-01T00:00:00Z"}]}`, true},
		{"SessionChanges", `{"status":"running","answer":[1]}`, false},
		{"SessionChanges", `{"status":"running","new_events":[{"type":"AgentEvent","timestamp":"2026-01-01T00:00:00Z"}]}`, false},
		{"BrowserProfileRead", `{"id":"6f1c2a0e-1b2c-4d3e-8f90-123456789abc","user_id":"6f1c2a0e-1b2c-4d3e-8f90-123456789abd","org_id":"6f1c2a0e-1b2c-4d3e-8f90-123456789abe","name":"shop","browser_name":"chromium","browser_version":"140","labels":null,"created_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-01T00:00:00Z"}`, true},
		{"BrowserProfileRead", `{"id":"6f1c2a0e-1b2c-4d3e-8f90-123456789abc","name":"shop","browser_name":"chromium","browser_version":"140","created_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-01T00:00:00Z"}`, false},
		{"InitiateUploadResponse", `{"profile_id":"6f1c2a0e-1b2c-4d3e-8f90-123456789abc","upload_url":"http://x/u","upload_fields":{"token":"t"},"upload_expires_in":3600}`, true},
		{"InitiateUploadResponse", `{"profile_id":"6f1c2a0e-1b2c-4d3e-8f90-123456789abc","upload_url":"http://x/u","upload_fields":{"token":1},"upload_expires_in":3600}`, false},
	} {
		var v any
		if err := json.Unmarshal([]byte(tc.body), &v); err != nil {
			t.Fatal(err)
		}
		err := c.schemas[tc.schema].Validate(v)
		if (err == nil) != tc.ok {
			t.Errorf("%s %s: valid = %v, want %v (%v)", tc.schema, tc.body, err == nil, tc.ok, err)
		}
	}
}
