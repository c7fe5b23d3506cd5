package client_test

import (
	"errors"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/hrns-dev/hrns/client"
	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/platform/vault"
	"github.com/hrns-dev/hrns/server"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store/sqlite"
)

func TestVaults(t *testing.T) {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "hrns.db"), &sqlite.Options{RelaxedSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	keys, _ := vault.ParseKeys("k1:q5Jc0cDUI2pV3ZjGZ4YAbKXm1nFbQPh3mR+H3Cw5W8s=")
	vaults := vault.New(st, keys, nil)
	m := session.New(st, llmtest.NewModel(), nil)
	srv := httptest.NewServer(newServer(m, &server.Options{APIKeys: []string{"sk-a", "sk-b"}, Vaults: vaults}))
	defer srv.Close()
	ctx := t.Context()
	a := client.New(srv.URL, "sk-a", nil)
	b := client.New(srv.URL, "sk-b", nil)

	v, err := a.CreateVault(ctx, &client.VaultCreate{Name: "logins", ProviderConfig: client.VaultProviderConfig{OpVaultID: "x"}, Token: "JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP"})
	if err != nil {
		t.Fatal(err)
	}
	if v.ProviderConfig.Provider != "onepassword" || v.OrgID == "" || v.CreatedAt.IsZero() {
		t.Errorf("created %+v", v)
	}
	if _, err := a.CreateVault(ctx, &client.VaultCreate{Name: "bad", ProviderConfig: client.VaultProviderConfig{OpVaultID: "x"}, Token: "nope"}); !errors.Is(err, client.ErrInvalid) {
		t.Errorf("an invalid token: %v, want ErrInvalid", err)
	}
	name := "renamed"
	if u, err := a.UpdateVault(ctx, v.ID, &client.VaultUpdate{Name: &name}); err != nil || u.Name != name || u.ProviderConfig.OpVaultID != "x" {
		t.Errorf("UpdateVault = %+v, %v", u, err)
	}
	if err := a.SetVaultToken(ctx, v.ID, `{"github":"JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP"}`); err != nil {
		t.Fatal(err)
	}
	if h, err := a.CheckVault(ctx, v.ID); err != nil || !h.OK || h.Error != "" {
		t.Errorf("CheckVault = %+v, %v", h, err)
	}
	if l, err := a.ListVaults(ctx, 10, 0); err != nil || l.Total != 1 || len(l.Vaults) != 1 || l.Vaults[0].Name != name || l.Limit != 10 {
		t.Errorf("ListVaults = %+v, %v", l, err)
	}
	if _, err := b.GetVault(ctx, v.ID); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("another key's GetVault: %v, want ErrNotFound", err)
	}
	if err := b.DeleteVault(ctx, v.ID); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("another key's DeleteVault: %v, want ErrNotFound", err)
	}
	if err := a.DeleteVault(ctx, v.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := a.GetVault(ctx, v.ID); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("GetVault after delete: %v, want ErrNotFound", err)
	}
}
