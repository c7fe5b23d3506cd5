package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/hrns-dev/hrns/store"
)

// vaultTests are the subtests of [store.Vaults].
var vaultTests = []struct {
	name string
	fn   func(t *testing.T, st store.Store)
}{
	{"VaultCRUD", testVaultCRUD},
	{"VaultScope", testVaultScope},
	{"VaultList", testVaultList},
	{"VaultUpdateConcurrent", testVaultUpdateConcurrent},
	{"VaultsNotUnderKey", testVaultsNotUnderKey},
}

// cmpVault compares vaults byte for byte: the Config and Secret a store
// returns are the bytes it was given.
var cmpVault = cmpopts.EquateApproxTime(time.Microsecond)

func newVault(id, owner string) *store.Vault {
	return &store.Vault{
		ID:        id,
		Owner:     owner,
		Name:      "Support logins",
		Config:    json.RawMessage(`{"provider":"onepassword","op_vault_id":"support"}`),
		KeyID:     "k1",
		Secret:    []byte{0x00, 0x9f, 0xff, 0x10, 0x42},
		CreatedAt: base,
	}
}

func vaultID(i int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", i) }

func mustCreateVault(t *testing.T, st store.Store, v *store.Vault) *store.Vault {
	t.Helper()
	got, err := st.CreateVault(t.Context(), v)
	if err != nil {
		t.Fatalf("CreateVault(%s) = %v", v.ID, err)
	}
	return got
}

func testVaultCRUD(t *testing.T, st store.Store) {
	ctx := t.Context()
	in := newVault(vaultID(1), "alice")
	got := mustCreateVault(t, st, in)
	want := *in
	want.Version, want.UpdatedAt = 1, base
	want.Secret = []byte{0x00, 0x9f, 0xff, 0x10, 0x42}
	if diff := cmp.Diff(&want, got, cmpVault); diff != "" {
		t.Errorf("CreateVault returned (-want +got):\n%s", diff)
	}
	in.Secret[0] = 0x77 // the store kept a copy
	read, err := st.GetVault(ctx, "alice", vaultID(1))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&want, read, cmpVault); diff != "" {
		t.Errorf("GetVault (-want +got):\n%s", diff)
	}

	upd := *read
	upd.Name, upd.KeyID, upd.Secret = "Renamed", "k2", []byte("other ciphertext")
	upd.Config = json.RawMessage(`{"provider":"onepassword","op_vault_id":"ops"}`)
	after, err := st.UpdateVault(ctx, &upd)
	if err != nil {
		t.Fatal(err)
	}
	if after.Version != 2 || !after.CreatedAt.Equal(base) || after.UpdatedAt.Before(base) {
		t.Errorf("UpdateVault: version %d, created %v, updated %v; want 2, %v, later", after.Version, after.CreatedAt, after.UpdatedAt, base)
	}
	read, err = st.GetVault(ctx, "alice", vaultID(1))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(after, read, cmpVault); diff != "" {
		t.Errorf("GetVault after update (-want +got):\n%s", diff)
	}
	// The version read before is stale now.
	if _, err := st.UpdateVault(ctx, &upd); !errors.Is(err, store.ErrConflict) {
		t.Errorf("UpdateVault with a stale version = %v, want ErrConflict", err)
	}
	if err := st.DeleteVault(ctx, "alice", vaultID(1)); err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetVault(ctx, "alice", vaultID(1)); !errors.Is(err, store.ErrVaultNotFound) {
		t.Errorf("GetVault after delete = %v, want ErrVaultNotFound", err)
	}
	if err := st.DeleteVault(ctx, "alice", vaultID(1)); !errors.Is(err, store.ErrVaultNotFound) {
		t.Errorf("DeleteVault twice = %v, want ErrVaultNotFound", err)
	}
	if _, err := st.UpdateVault(ctx, after); !errors.Is(err, store.ErrVaultNotFound) {
		t.Errorf("UpdateVault of a deleted vault = %v, want ErrVaultNotFound", err)
	}
	if _, err := st.CreateVault(ctx, newVault(vaultID(2), "alice")); err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateVault(ctx, newVault(vaultID(2), "bob")); err == nil {
		t.Error("CreateVault of an id in use succeeded")
	}
}

// testVaultScope: an owner never reads, changes or deletes another's
// vault, even knowing its id.
func testVaultScope(t *testing.T, st store.Store) {
	ctx := t.Context()
	v := mustCreateVault(t, st, newVault(vaultID(1), "alice"))
	if _, err := st.GetVault(ctx, "bob", v.ID); !errors.Is(err, store.ErrVaultNotFound) {
		t.Errorf("GetVault by another owner = %v, want ErrVaultNotFound", err)
	}
	other := *v
	other.Owner, other.Name = "bob", "stolen"
	if _, err := st.UpdateVault(ctx, &other); !errors.Is(err, store.ErrVaultNotFound) {
		t.Errorf("UpdateVault by another owner = %v, want ErrVaultNotFound", err)
	}
	if err := st.DeleteVault(ctx, "bob", v.ID); !errors.Is(err, store.ErrVaultNotFound) {
		t.Errorf("DeleteVault by another owner = %v, want ErrVaultNotFound", err)
	}
	page, total, err := st.ListVaults(ctx, &store.VaultListParams{Owner: "bob"})
	if err != nil || total != 0 || len(page) != 0 {
		t.Errorf("ListVaults of bob = %d of %d, %v; want none", len(page), total, err)
	}
	got, err := st.GetVault(ctx, "alice", v.ID)
	if err != nil || got.Name != v.Name || got.Version != 1 {
		t.Errorf("alice's vault after bob's attempts = %+v, %v; want it unchanged", got, err)
	}
}

func testVaultList(t *testing.T, st store.Store) {
	ctx := t.Context()
	for i := range 5 {
		v := newVault(vaultID(i+1), "alice")
		v.Name = fmt.Sprintf("vault %d", i+1)
		v.CreatedAt = base.Add(time.Duration(i) * time.Minute)
		if i == 4 {
			v.CreatedAt = base.Add(3 * time.Minute) // ties with vault 4: by id
		}
		mustCreateVault(t, st, v)
	}
	mustCreateVault(t, st, newVault(vaultID(9), "bob"))
	page, total, err := st.ListVaults(ctx, &store.VaultListParams{Owner: "alice", Offset: 1, Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, v := range page {
		names = append(names, v.Name)
		if v.Secret != nil {
			t.Errorf("ListVaults returned %s with its secret", v.ID)
		}
		if v.KeyID != "k1" || string(v.Config) == "" {
			t.Errorf("ListVaults returned %s with key %q, config %q", v.ID, v.KeyID, v.Config)
		}
	}
	if total != 5 {
		t.Errorf("total = %d, want 5", total)
	}
	if diff := cmp.Diff([]string{"vault 5", "vault 3", "vault 2"}, names); diff != "" {
		t.Errorf("page (-want +got):\n%s", diff)
	}
	page, _, err = st.ListVaults(ctx, &store.VaultListParams{Owner: "alice", Offset: 10})
	if err != nil || len(page) != 0 {
		t.Errorf("page past the end = %d, %v", len(page), err)
	}
}

// testVaultUpdateConcurrent: of concurrent updates from one version, one
// wins; the others get ErrConflict.
func testVaultUpdateConcurrent(t *testing.T, st store.Store) {
	v := mustCreateVault(t, st, newVault(vaultID(1), "alice"))
	const n = 8
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		ok, stale int
	)
	for i := range n {
		wg.Go(func() {
			u := *v
			u.Name = fmt.Sprintf("name %d", i)
			_, err := st.UpdateVault(t.Context(), &u)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				ok++
			case errors.Is(err, store.ErrConflict):
				stale++
			default:
				t.Errorf("UpdateVault = %v", err)
			}
		})
	}
	wg.Wait()
	if ok != 1 || stale != n-1 {
		t.Errorf("%d updates succeeded and %d conflicted; want 1 and %d", ok, stale, n-1)
	}
}

func testVaultsNotUnderKey(t *testing.T, st store.Store) {
	ctx := t.Context()
	for i, key := range []string{"k1", "k2", "k1", "k1", "k2"} {
		v := newVault(vaultID(i+1), []string{"alice", "bob"}[i%2])
		v.KeyID = key
		mustCreateVault(t, st, v)
	}
	var got []string
	after := ""
	for range 10 {
		page, err := st.VaultsNotUnderKey(ctx, "k2", after, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, v := range page {
			if len(v.Secret) == 0 {
				t.Errorf("VaultsNotUnderKey returned %s without its secret", v.ID)
			}
			got = append(got, v.ID+" "+v.Owner+" "+v.KeyID)
		}
		after = page[len(page)-1].ID
	}
	want := []string{vaultID(1) + " alice k1", vaultID(3) + " alice k1", vaultID(4) + " bob k1"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("vaults not under k2 (-want +got):\n%s", diff)
	}
}
