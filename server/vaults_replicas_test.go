package server_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/platform/vault"
	"github.com/hrns-dev/hrns/server"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store/postgres"
	"github.com/hrns-dev/hrns/store/postgres/postgrestest"
)

// Two replicas sharing a PostgreSQL store and a vault key: a vault
// written through one is read, rotated and used through the other, and
// the store holds only ciphertext.
func TestVaultReplicas(t *testing.T) {
	dsn := postgrestest.DSN(t)
	now := time.Unix(1111111109, 0)
	keys, err := vault.ParseKeys(testVaultKey)
	if err != nil {
		t.Fatal(err)
	}
	type replica struct {
		*env
		svc *vault.Service
	}
	open := func() *replica {
		st, err := postgres.Open(t.Context(), dsn, &postgres.Options{MaxConns: 4})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		svc := vault.New(st, keys, &vault.Options{Now: func() time.Time { return now }})
		m := session.New(st, llmtest.NewModel(), &session.Options{Environments: map[string]*loop.Toolset{"web": {}}, Vaults: svc.SessionTools()})
		srv := httptest.NewServer(contractHandler(t, newServer(m, &server.Options{APIKeys: []string{keyAlice, keyBob}, Vaults: svc})))
		t.Cleanup(srv.Close)
		return &replica{env: &env{t: t, url: srv.URL, st: st}, svc: svc}
	}
	a, b := open(), open()
	r := a.call("POST", "/api/v2/vaults", keyAlice, `{"name":"logins","provider_config":{"op_vault_id":"x"},"token":"`+testSeed+`"}`, http.StatusCreated, "")
	var v struct{ ID string }
	r.json(&v)
	if r := b.call("GET", "/api/v2/vaults/"+v.ID+"/health", keyAlice, nil, http.StatusOK, ""); !strings.Contains(string(r.body), `"ok":true`) {
		t.Errorf("replica b: %s", r.body)
	}
	b.call("PUT", "/api/v2/vaults/"+v.ID+"/token", keyAlice, `{"token":"{\"github\":\"`+testSeed+`\"}"}`, http.StatusNoContent, "")
	owner := "key:" + keyHash(keyAlice)
	c, err := a.svc.Code(t.Context(), owner, v.ID, "github")
	if err != nil || c.Code != totpAt(testSeedRaw, now, 30, 6) {
		t.Errorf("replica a's code after b's rotation = %+v, %v", c, err)
	}
	b.call("GET", "/api/v2/vaults/"+v.ID, keyBob, nil, http.StatusNotFound, "")
	// A session created through b may name the vault created through a.
	b.call("POST", "/api/v2/sessions", keyAlice, `{"agent":{"name":"a","environments":[{"kind":"web","vault_id":"`+v.ID+`"}]},"messages":"hi"}`, http.StatusCreated, "")
	stored, err := a.st.GetVault(t.Context(), owner, v.ID)
	if err != nil {
		t.Fatal(err)
	}
	assertNoSecret(t, "the PostgreSQL row", append(append([]byte{}, stored.Secret...), stored.Config...))
}
