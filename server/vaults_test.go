package server_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base32"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/openai"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/platform/schedule"
	"github.com/hrns-dev/hrns/platform/vault"
	"github.com/hrns-dev/hrns/server"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store"
	"github.com/hrns-dev/hrns/store/sqlite"
)

// The vault key and TOTP seed of the tests (made up for them).
const (
	testVaultKey = "test1:q5Jc0cDUI2pV3ZjGZ4YAbKXm1nFbQPh3mR+H3Cw5W8s="
	// testSeed is the base32 form of testSeedRaw.
	testSeed = "JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP"
)

var testSeedRaw, _ = base32.StdEncoding.DecodeString(testSeed)

// vaultEnv is env with vaults: the server's vault service on the same
// SQLite file, the logs of server, manager and vaults in one buffer, and
// every response body the API gave kept.
type vaultEnv struct {
	*env
	svc  *vault.Service
	db   string
	logs *syncBuffer
	resp *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.b.Bytes())
}

// newVaultEnv starts a server whose vaults use keys (nil: none) and the
// clock now.
func newVaultEnv(t *testing.T, keys string, now time.Time, replies ...openaitest.Reply) *vaultEnv {
	t.Helper()
	model := openaitest.NewServer(replies...)
	t.Cleanup(model.Close)
	db := filepath.Join(t.TempDir(), "hrns.db")
	st, err := sqlite.Open(db, &sqlite.Options{RelaxedSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var ring *vault.Keyring
	if keys != "" {
		if ring, err = vault.ParseKeys(keys); err != nil {
			t.Fatal(err)
		}
	}
	svc := vault.New(st, ring, &vault.Options{Now: func() time.Time { return now }, Logger: log})
	m := session.New(st, &openai.Client{BaseURL: model.URL(), Model: "test-model"}, &session.Options{
		Environments: map[string]*loop.Toolset{"web": {}},
		Vaults:       svc.SessionTools(),
		Logger:       log,
	})
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	resp := &syncBuffer{}
	sch := schedule.New(m, st, &schedule.Options{Owner: "replica-1"})
	h := contractHandler(t, newServer(m, &server.Options{APIKeys: []string{keyAlice, keyBob}, Vaults: svc, Schedules: sch, Logger: log}))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(&teeWriter{ResponseWriter: w, to: resp}, r)
	}))
	t.Cleanup(func() {
		srv.Close()
		m.Stop(context.Background())
	})
	return &vaultEnv{env: &env{t: t, model: model, url: srv.URL, st: st}, svc: svc, db: db, logs: logs, resp: resp}
}

// teeWriter copies a response body.
type teeWriter struct {
	http.ResponseWriter
	to io.Writer
}

func (w *teeWriter) Write(b []byte) (int, error) {
	w.to.Write(b)
	return w.ResponseWriter.Write(b)
}

func (w *teeWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (e *vaultEnv) createVault(key, name, token string) string {
	e.t.Helper()
	r := e.call("POST", "/api/v2/vaults", key, map[string]any{"name": name, "provider_config": map[string]any{"op_vault_id": "ops"}, "token": token}, http.StatusCreated, "")
	var v struct{ ID string }
	r.json(&v)
	if r.header.Get("Location") != "/api/v2/vaults/"+v.ID {
		e.t.Errorf("Location %q", r.header.Get("Location"))
	}
	return v.ID
}

func TestVaultsCRUD(t *testing.T) {
	e := newVaultEnv(t, testVaultKey, time.Unix(0, 0))
	token := `{"github":"otpauth://totp/GitHub:alice?secret=` + testSeed + `&issuer=GitHub","aws":"` + testSeed + `"}`
	id := e.createVault(keyAlice, "Support logins", token)
	e.createVault(keyAlice, "Second", testSeed)
	bobs := e.createVault(keyBob, "Bob's", testSeed)

	var got struct {
		ID, OrgID, Name string
		ProviderConfig  vault.ProviderConfig `json:"provider_config"`
	}
	e.call("GET", "/api/v2/vaults/"+id, keyAlice, nil, http.StatusOK, "").json(&got)
	if got.ID != id || got.Name != "Support logins" || got.ProviderConfig != (vault.ProviderConfig{Provider: "onepassword", OpVaultID: "ops"}) {
		t.Errorf("GET = %+v", got)
	}
	// Without dashes, in upper case: the same vault.
	e.call("GET", "/api/v2/vaults/"+strings.ToUpper(strings.ReplaceAll(id, "-", "")), keyAlice, nil, http.StatusOK, "")

	var list struct {
		Total, Limit, Offset int
		Vaults               []struct{ ID, Name string }
	}
	e.call("GET", "/api/v2/vaults?limit=1&offset=1", keyAlice, nil, http.StatusOK, "").json(&list)
	if list.Total != 2 || list.Limit != 1 || list.Offset != 1 || len(list.Vaults) != 1 || list.Vaults[0].ID != id {
		t.Errorf("list = %+v, want alice's 2 vaults, the oldest on page 2", list)
	}

	e.call("PATCH", "/api/v2/vaults/"+id, keyAlice, `{"name":"Renamed","provider_config":null}`, http.StatusOK, "").json(&got)
	if got.Name != "Renamed" || got.ProviderConfig.OpVaultID != "ops" {
		t.Errorf("PATCH name = %+v", got)
	}
	e.call("PATCH", "/api/v2/vaults/"+id, keyAlice, `{"provider_config":{"provider":"onepassword","op_vault_id":"ops-2"}}`, http.StatusOK, "").json(&got)
	if got.Name != "Renamed" || got.ProviderConfig.OpVaultID != "ops-2" {
		t.Errorf("PATCH provider_config = %+v", got)
	}

	var health struct {
		OK    bool    `json:"ok"`
		Error *string `json:"error"`
	}
	e.call("GET", "/api/v2/vaults/"+id+"/health", keyAlice, nil, http.StatusOK, "").json(&health)
	if !health.OK || health.Error != nil {
		t.Errorf("health = %+v", health)
	}
	r := e.call("PUT", "/api/v2/vaults/"+id+"/token", keyAlice, map[string]string{"token": `{"gitlab":"` + testSeed + `"}`}, http.StatusNoContent, "")
	if len(r.body) != 0 {
		t.Errorf("PUT token answered a body: %s", r.body)
	}
	if names, err := e.svc.Entries(t.Context(), "key:"+keyHash(keyAlice), id); err != nil || strings.Join(names, ",") != "gitlab" {
		t.Errorf("entries after the token's rotation = %v, %v; want gitlab", names, err)
	}

	// Another key's vault is not found, whatever the operation.
	for _, op := range []struct{ method, path, body string }{
		{"GET", "/api/v2/vaults/" + bobs, ""},
		{"PATCH", "/api/v2/vaults/" + bobs, `{"name":"mine"}`},
		{"PUT", "/api/v2/vaults/" + bobs + "/token", `{"token":"` + testSeed + `"}`},
		{"GET", "/api/v2/vaults/" + bobs + "/health", ""},
		{"DELETE", "/api/v2/vaults/" + bobs, ""},
	} {
		var body any
		if op.body != "" {
			body = op.body
		}
		e.call(op.method, op.path, keyAlice, body, http.StatusNotFound, "")
	}
	e.call("GET", "/api/v2/vaults/"+bobs, keyBob, nil, http.StatusOK, "")

	e.call("DELETE", "/api/v2/vaults/"+id, keyAlice, nil, http.StatusNoContent, "")
	e.call("GET", "/api/v2/vaults/"+id, keyAlice, nil, http.StatusNotFound, "")
	e.call("DELETE", "/api/v2/vaults/"+id, keyAlice, nil, http.StatusNotFound, "")
	e.call("GET", "/api/v2/vaults", "", nil, http.StatusUnauthorized, "")

	assertNoSecret(t, "the API's responses", e.resp.Bytes())
}

// keyHash is the owner id the server gives an API key.
func keyHash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:8])
}

func TestVaultsValidation(t *testing.T) {
	e := newVaultEnv(t, testVaultKey, time.Unix(0, 0))
	id := e.createVault(keyAlice, "v", testSeed)
	for _, tt := range []struct {
		name, method, path, body, loc string
	}{
		{"no name", "POST", "/api/v2/vaults", `{"provider_config":{"op_vault_id":"x"},"token":"` + testSeed + `"}`, "body.name"},
		{"no provider_config", "POST", "/api/v2/vaults", `{"name":"n","token":"` + testSeed + `"}`, "body.provider_config"},
		{"no op_vault_id", "POST", "/api/v2/vaults", `{"name":"n","provider_config":{},"token":"` + testSeed + `"}`, "body.provider_config.op_vault_id"},
		{"other provider", "POST", "/api/v2/vaults", `{"name":"n","provider_config":{"provider":"bitwarden","op_vault_id":"x"},"token":"` + testSeed + `"}`, "body.provider_config.provider"},
		{"no token", "POST", "/api/v2/vaults", `{"name":"n","provider_config":{"op_vault_id":"x"}}`, "body.token"},
		{"token not a string", "POST", "/api/v2/vaults", `{"name":"n","provider_config":{"op_vault_id":"x"},"token":7}`, "body.token"},
		{"empty name", "POST", "/api/v2/vaults", `{"name":" ","provider_config":{"op_vault_id":"x"},"token":"` + testSeed + `"}`, "body.name"},
		{"control in name", "POST", "/api/v2/vaults", `{"name":"a\u0007b","provider_config":{"op_vault_id":"x"},"token":"` + testSeed + `"}`, "body.name"},
		{"token not base32", "POST", "/api/v2/vaults", `{"name":"n","provider_config":{"op_vault_id":"x"},"token":"not a seed!"}`, "body.token"},
		{"seed too short", "POST", "/api/v2/vaults", `{"name":"n","provider_config":{"op_vault_id":"x"},"token":"JBSWY3DP"}`, "body.token"},
		{"hotp", "POST", "/api/v2/vaults", `{"name":"n","provider_config":{"op_vault_id":"x"},"token":"otpauth://hotp/x?secret=` + testSeed + `&counter=1"}`, "body.token"},
		{"bad digits", "POST", "/api/v2/vaults", `{"name":"n","provider_config":{"op_vault_id":"x"},"token":"otpauth://totp/x?secret=` + testSeed + `&digits=7"}`, "body.token"},
		{"entry not a string", "POST", "/api/v2/vaults", `{"name":"n","provider_config":{"op_vault_id":"x"},"token":"{\"a\":1}"}`, "body.token"},
		{"no entries", "POST", "/api/v2/vaults", `{"name":"n","provider_config":{"op_vault_id":"x"},"token":"{}"}`, "body.token"},
		{"not JSON", "POST", "/api/v2/vaults", `{"name":`, "body"},
		{"empty body", "POST", "/api/v2/vaults", ``, "body"},
		{"limit 0", "GET", "/api/v2/vaults?limit=0", "", "query.limit"},
		{"limit 1001", "GET", "/api/v2/vaults?limit=1001", "", "query.limit"},
		{"offset -1", "GET", "/api/v2/vaults?offset=-1", "", "query.offset"},
		{"bad id", "GET", "/api/v2/vaults/nope", "", "path.vault_id"},
		{"bad id health", "GET", "/api/v2/vaults/nope/health", "", "path.vault_id"},
		{"patch name type", "PATCH", "/api/v2/vaults/" + id, `{"name":3}`, "body.name"},
		{"patch empty name", "PATCH", "/api/v2/vaults/" + id, `{"name":""}`, "body.name"},
		{"token missing", "PUT", "/api/v2/vaults/" + id + "/token", `{}`, "body.token"},
		{"token invalid", "PUT", "/api/v2/vaults/" + id + "/token", `{"token":"otpauth://totp/x?secret=` + testSeed + `&algorithm=MD5"}`, "body.token"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var body any
			if tt.method != "GET" {
				body = tt.body
			}
			r := e.call(tt.method, tt.path, keyAlice, body, http.StatusUnprocessableEntity, "")
			var d struct {
				Detail []struct {
					Loc []any
					Msg string
				}
			}
			r.json(&d)
			if len(d.Detail) == 0 {
				t.Fatalf("no detail: %s", r.body)
			}
			var loc []string
			for _, l := range d.Detail[0].Loc {
				loc = append(loc, fmt.Sprint(l))
			}
			if got := strings.Join(loc, "."); got != tt.loc {
				t.Errorf("loc %s, want %s (%s)", got, tt.loc, d.Detail[0].Msg)
			}
		})
	}
	// The vault is as it was.
	if names, err := e.svc.Entries(t.Context(), "key:"+keyHash(keyAlice), id); err != nil || strings.Join(names, ",") != vault.DefaultEntry {
		t.Errorf("entries = %v, %v", names, err)
	}
	assertNoSecret(t, "the API's responses", e.resp.Bytes())
}

// TestVaultsNotConfigured: without a key, the vault routes say so and
// nothing is stored; a session naming a vault is refused.
func TestVaultsNotConfigured(t *testing.T) {
	e := newVaultEnv(t, "", time.Unix(0, 0))
	for _, op := range []struct{ method, path, body string }{
		{"POST", "/api/v2/vaults", `{"name":"n","provider_config":{"op_vault_id":"x"},"token":"` + testSeed + `"}`},
		{"GET", "/api/v2/vaults", ""},
		{"GET", "/api/v2/vaults/6f1c2a0e-1b2c-4d3e-8f90-123456789abc", ""},
		{"PUT", "/api/v2/vaults/6f1c2a0e-1b2c-4d3e-8f90-123456789abc/token", `{"token":"` + testSeed + `"}`},
	} {
		var body any
		if op.body != "" {
			body = op.body
		}
		r := e.call(op.method, op.path, keyAlice, body, http.StatusNotImplemented, "")
		if !strings.Contains(string(r.body), "HRNS_VAULT_KEY") {
			t.Errorf("%s %s: %s, want the way to configure a key", op.method, op.path, r.body)
		}
	}
	body := `{"agent":{"name":"a","environments":[{"kind":"web","vault_id":"6f1c2a0e-1b2c-4d3e-8f90-123456789abc"}]},"messages":"hi"}`
	e.call("POST", "/api/v2/sessions", keyAlice, body, http.StatusUnprocessableEntity, "")
	assertFileHasNoSecret(t, e.db)
}

// TestVaultSessionScope: a session may name only its own key's vaults,
// and a vault_id that is not a UUID is refused; the tool's name clashes
// with no client tool.
func TestVaultSessionScope(t *testing.T) {
	e := newVaultEnv(t, testVaultKey, time.Unix(0, 0))
	bobs := e.createVault(keyBob, "Bob's", testSeed)
	alices := e.createVault(keyAlice, "Alice's", testSeed)
	for _, tt := range []struct{ name, body string }{
		{"another key's vault", `{"agent":{"name":"a","environments":[{"kind":"web","vault_id":"` + bobs + `"}]},"messages":"hi"}`},
		{"unknown vault", `{"agent":{"name":"a","environments":[{"kind":"web","vault_id":"6f1c2a0e-1b2c-4d3e-8f90-123456789abc"}]},"messages":"hi"}`},
		{"not a uuid", `{"agent":{"name":"a","environments":[{"kind":"web","vault_id":"vault-1"}]},"messages":"hi"}`},
		{"not a string", `{"agent":{"name":"a","environments":[{"kind":"web","vault_id":7}]},"messages":"hi"}`},
		{"override to another key's vault", `{"agent":{"name":"a","environments":[{"kind":"web"}]},"messages":"hi","overrides":{"agent.environments[kind=web].vault_id":"` + bobs + `"}}`},
		{"client tool clash", `{"agent":{"name":"a","environments":[{"kind":"web","vault_id":"` + alices + `"}],"tools":[{"name":"one_time_code","description":"mine"}]},"messages":"hi"}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e.call("POST", "/api/v2/sessions", keyAlice, tt.body, http.StatusUnprocessableEntity, "")
		})
	}
	r := e.call("POST", "/api/v2/sessions", keyBob, `{"agent":{"name":"a","environments":[{"kind":"web","vault_id":"`+bobs+`"}]},"messages":"hi"}`, http.StatusCreated, "")
	if h := r.header.Get("Hrns-Not-Honoured"); strings.Contains(h, "vault_id") {
		t.Errorf("Hrns-Not-Honoured: %s", h)
	}
}

// TestVaultScheduleScope: a schedule's session template is validated as
// a session request, at creation and at update: another key's vault in
// it is refused (422) as it is for a session, and the key's own is taken
// (issue 32, finding 12).
func TestVaultScheduleScope(t *testing.T) {
	e := newVaultEnv(t, testVaultKey, time.Unix(0, 0))
	bobs := e.createVault(keyBob, "Bob's", testSeed)
	alices := e.createVault(keyAlice, "Alice's", testSeed)
	schedule := func(template string) string {
		return `{"name":"nightly","timing":{"expression":"0 9 * * *","timezone":"UTC"},"session_request":` + template + `}`
	}
	bad := map[string]string{
		"another key's vault":             `{"agent":{"name":"a","environments":[{"kind":"web","vault_id":"` + bobs + `"}]},"messages":"hi"}`,
		"unknown vault":                   `{"agent":{"name":"a","environments":[{"kind":"web","vault_id":"6f1c2a0e-1b2c-4d3e-8f90-123456789abc"}]},"messages":"hi"}`,
		"override to another key's vault": `{"agent":{"name":"a","environments":[{"kind":"web"}]},"messages":"hi","overrides":{"agent.environments[kind=web].vault_id":"` + bobs + `"}}`,
		"client tool clash":               `{"agent":{"name":"a","environments":[{"kind":"web","vault_id":"` + alices + `"}],"tools":[{"name":"one_time_code","description":"mine"}]},"messages":"hi"}`,
	}
	r := e.call("POST", "/api/v2/schedules", keyAlice, schedule(`{"agent":{"name":"a","environments":[{"kind":"web","vault_id":"`+alices+`"}]},"messages":"hi"}`), http.StatusCreated, "")
	var own struct{ ID string }
	r.json(&own)
	for name, template := range bad {
		for _, op := range []struct{ method, path, body string }{
			{"POST", "/api/v2/sessions", template},
			{"POST", "/api/v2/schedules", schedule(template)},
			{"PATCH", "/api/v2/schedules/" + own.ID, `{"session_request":` + template + `}`},
		} {
			if r := e.do(op.method, op.path, keyAlice, op.body); r.status != http.StatusUnprocessableEntity {
				t.Errorf("%s: %s %s = %d, want 422: %s", name, op.method, op.path, r.status, r.body)
			}
		}
	}
	e.call("POST", "/api/v2/schedules", keyBob, schedule(`{"agent":{"name":"a","environments":[{"kind":"web","vault_id":"`+bobs+`"}]},"messages":"hi"}`), http.StatusCreated, "")
}

// TestVaultOneTimeCode runs a session whose agent asks for a one-time
// code: it gets the code of the fake clock's time, and the seed is
// nowhere: not in the SQLite file or its WAL, an event, the logs, an API
// response, or what the model was sent.
func TestVaultOneTimeCode(t *testing.T) {
	now := time.Date(2026, 6, 1, 15, 14, 5, 0, time.UTC)
	var result string
	e := newVaultEnv(t, testVaultKey, now,
		openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall("call_1", vault.ToolName, `{"entry":"github"}`)}},
		openaitest.Reply{Func: func(body []byte) openaitest.Reply {
			result = string(body)
			return openaitest.Reply{Text: "Signed in."}
		}},
	)
	token := `{"github":"otpauth://totp/GitHub:alice?secret=` + strings.ToLower(testSeed) + `&issuer=GitHub&period=30&digits=6","other":"` + testSeed + `"}`
	id := e.createVault(keyAlice, "Logins", token)
	sid := e.create(keyAlice, `{"agent":{"name":"signer","environments":[{"kind":"web","vault_id":"`+id+`"}]},"messages":"Sign in to GitHub."}`)
	f := e.follow(keyAlice, sid)
	f.status(session.StatusCompleted)

	want := totpAt(testSeedRaw, now, 30, 6)
	var found bool
	for _, ev := range f.events {
		if strings.Contains(string(ev.Data), `\"code\":\"`+want+`\"`) || strings.Contains(string(ev.Data), `"code":"`+want+`"`) {
			found = true
		}
	}
	if !found {
		t.Errorf("no event holds the code %s; events:\n%s", want, f.dump())
	}
	if !strings.Contains(result, want) {
		t.Errorf("the model was not given the code %s: %s", want, result)
	}
	// The session's whole history, as the API gives it.
	e.call("GET", "/api/v2/sessions/"+sid+"/events?limit=1000", keyAlice, nil, http.StatusOK, "")
	e.call("GET", "/api/v2/sessions/"+sid, keyAlice, nil, http.StatusOK, "")

	events, err := e.st.Events(t.Context(), sid, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var all bytes.Buffer
	for _, ev := range events {
		all.Write(ev.Data)
	}
	assertNoSecret(t, "the stored events", all.Bytes())
	for _, req := range e.model.Requests() {
		assertNoSecret(t, "a model request", req.Body)
	}
	assertNoSecret(t, "the logs", e.logs.Bytes())
	assertNoSecret(t, "the API's responses", e.resp.Bytes())
	assertFileHasNoSecret(t, e.db)
}

// totpAt is RFC 6238's TOTP with SHA-1, written here from the RFC so that
// the test does not check the library with itself.
func totpAt(key []byte, t time.Time, period int64, digits int) string {
	var msg [8]byte
	binary.BigEndian.PutUint64(msg[:], uint64(t.Unix()/period))
	mac := hmac.New(sha1.New, key)
	mac.Write(msg[:])
	sum := mac.Sum(nil)
	off := sum[len(sum)-1] & 0x0f
	bin := binary.BigEndian.Uint32(sum[off:]) & 0x7fffffff
	mod := uint32(1)
	for range digits {
		mod *= 10
	}
	return fmt.Sprintf("%0*d", digits, bin%mod)
}

// secretForms are the forms the test seed could leak in.
func secretForms() map[string][]byte {
	return map[string][]byte{
		"base32":           []byte(testSeed),
		"base32 lowercase": []byte(strings.ToLower(testSeed)),
		"base32 half":      []byte(testSeed[:16]), // each half is a valid seed too
		"raw":              testSeedRaw,
		"hex":              []byte(hex.EncodeToString(testSeedRaw)),
		"base64":           []byte(base64.StdEncoding.EncodeToString(testSeedRaw)),
	}
}

// leaks returns the forms of the seed b holds.
func leaks(b []byte) []string {
	var out []string
	for name, form := range secretForms() {
		if bytes.Contains(b, form) {
			out = append(out, name)
		}
	}
	return out
}

func assertNoSecret(t *testing.T, where string, b []byte) {
	t.Helper()
	if l := leaks(b); len(l) > 0 {
		t.Errorf("%s hold the seed (%s)", where, strings.Join(l, ", "))
	}
}

// TestSecretScanCatches checks the checks: the scan finds a seed written
// in plain text to the SQLite file, and totpAt gives RFC 6238's codes.
func TestSecretScanCatches(t *testing.T) {
	db := filepath.Join(t.TempDir(), "hrns.db")
	st, err := sqlite.Open(db, &sqlite.Options{RelaxedSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s := &store.Session{ID: "s1", Owner: "o", Status: "pending", Request: []byte(`{}`), State: []byte(`{}`)}
	if _, _, err := st.CreateSession(t.Context(), s, []store.Event{{Type: "AgentEvent", Data: []byte(`{"leak":"` + strings.ToLower(testSeed) + `"}`)}}); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range []string{db, db + "-wal"} {
		b, _ := os.ReadFile(p)
		found = found || slices.Contains(leaks(b), "base32 lowercase")
	}
	if !found {
		t.Error("the scan does not find a seed stored in plain text")
	}
	// RFC 6238, appendix B (SHA-1, 8 digits).
	rfcKey := []byte("12345678901234567890")
	for _, tt := range []struct {
		unix int64
		want string
	}{{59, "94287082"}, {1111111109, "07081804"}, {1234567890, "89005924"}, {2000000000, "69279037"}} {
		if got := totpAt(rfcKey, time.Unix(tt.unix, 0), 30, 8); got != tt.want {
			t.Errorf("totpAt(%d) = %s, want %s", tt.unix, got, tt.want)
		}
	}
}

// assertFileHasNoSecret scans every byte of the SQLite database and its
// WAL and shared-memory files.
func assertFileHasNoSecret(t *testing.T, db string) {
	t.Helper()
	scanned := 0
	for _, p := range []string{db, db + "-wal", db + "-shm"} {
		b, err := os.ReadFile(p)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		scanned += len(b)
		assertNoSecret(t, filepath.Base(p), b)
	}
	if scanned == 0 {
		t.Fatal("no database file to scan")
	}
}

// TestVaultRegisteredEnvironment: a registered environment's vault_id
// binds the vault to the sessions of agents that name it.
func TestVaultRegisteredEnvironment(t *testing.T) {
	now := time.Unix(1111111109, 0)
	e := newVaultEnv(t, testVaultKey, now,
		openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall("call_1", vault.ToolName, `{"entry":"default"}`)}},
		openaitest.Reply{Text: "done"},
	)
	id := e.createVault(keyAlice, "Logins", testSeed)
	e.call("POST", "/api/v2/environments", keyAlice, `{"id":"shop","kind":"web","vault_id":"`+id+`"}`, http.StatusCreated, "")
	e.call("POST", "/api/v2/agents", keyAlice, `{"name":"shopper","description":"Buys things.","environments":["shop"]}`, http.StatusCreated, "")
	sid := e.create(keyAlice, `{"agent":"shopper","messages":"Sign in."}`)
	f := e.follow(keyAlice, sid)
	f.status(session.StatusCompleted)
	want := totpAt(testSeedRaw, now, 30, 6)
	if !strings.Contains(f.dump(), want) {
		t.Errorf("no event holds the code %s:\n%s", want, f.dump())
	}
	// Deleted, the vault no longer serves the agent's new sessions.
	e.call("DELETE", "/api/v2/vaults/"+id, keyAlice, nil, http.StatusNoContent, "")
	e.call("POST", "/api/v2/sessions", keyAlice, `{"agent":"shopper","messages":"Sign in."}`, http.StatusUnprocessableEntity, "")
}
