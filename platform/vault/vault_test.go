package vault_test

import (
	"context"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/platform/vault"
	"github.com/hrns-dev/hrns/store"
	"github.com/hrns-dev/hrns/store/sqlite"
)

// Keys made up for the tests.
const (
	key1 = "k1:q5Jc0cDUI2pV3ZjGZ4YAbKXm1nFbQPh3mR+H3Cw5W8s="
	key2 = "k2:Zm9ydHktdHdvIGJ5dGVzIG9mIGEgbWFkZS11cCBrZXk="
	seed = "JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP"
)

func openStore(t *testing.T) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "hrns.db"), &sqlite.Options{RelaxedSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func keyring(t *testing.T, text string) *vault.Keyring {
	t.Helper()
	k, err := vault.ParseKeys(text)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func create(t *testing.T, s *vault.Service, owner, token string) string {
	t.Helper()
	v, err := s.Create(t.Context(), owner, &vault.CreateParams{Name: "v", Config: vault.ProviderConfig{OpVaultID: "x"}, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	if v.Secret != nil {
		t.Error("Create returned the secret")
	}
	return v.ID
}

func TestParseKeys(t *testing.T) {
	raw := "q5Jc0cDUI2pV3ZjGZ4YAbKXm1nFbQPh3mR+H3Cw5W8s="
	for _, tt := range []struct {
		name, text string
		ids        []string
		err        string
	}{
		{"named", key1, []string{"k1"}, ""},
		{"two, by comma", key2 + "," + key1, []string{"k2", "k1"}, ""},
		{"lines and comments", "# rotation of June\n\n" + key2 + "\n " + key1 + " \n", []string{"k2", "k1"}, ""},
		{"unnamed", raw, []string{"k" + derivedID(t, raw)}, ""},
		{"empty", " \n# none\n", nil, "no key"},
		{"not base64", "k1:not*base64", nil, "key 1 is not 32 bytes"},
		{"short", "k1:c2hvcnQ=", nil, "key 1 is not 32 bytes"},
		{"same id", key1 + "\nk1:Zm9ydHktdHdvIGJ5dGVzIG9mIGEgbWFkZS11cCBrZXk=", nil, "used twice"},
		{"bad id", "k 1:" + raw, nil, "invalid id"},
		{"too many", manyKeys(17), nil, "more than 16"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			k, err := vault.ParseKeys(tt.text)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				if strings.Contains(err.Error(), raw) || strings.Contains(err.Error(), "Zm9ydHkt") {
					t.Errorf("the error quotes a key: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(k.IDs(), ","); got != strings.Join(tt.ids, ",") || k.Primary() != tt.ids[0] {
				t.Errorf("ids %s primary %s, want %v", got, k.Primary(), tt.ids)
			}
		})
	}
}

func manyKeys(n int) string {
	var keys []string
	for i := range n {
		keys = append(keys, fmt.Sprintf("k%d:%s", i, "q5Jc0cDUI2pV3ZjGZ4YAbKXm1nFbQPh3mR+H3Cw5W8s="))
	}
	return strings.Join(keys, "\n")
}

// derivedID is the id ParseKeys gives an unnamed key: it does not change.
func derivedID(t *testing.T, raw string) string {
	k := keyring(t, raw)
	id := strings.TrimPrefix(k.Primary(), "k")
	if len(id) != 12 || keyring(t, raw).Primary() != k.Primary() {
		t.Fatalf("derived id %q", k.Primary())
	}
	return id
}

// TestCodes: RFC 6238's test vectors (appendix B), through otpauth URIs.
func TestCodes(t *testing.T) {
	b32 := func(s string) string { return base32.StdEncoding.EncodeToString([]byte(s)) }
	uris := map[string]string{
		"sha1":   "otpauth://totp/rfc?digits=8&secret=" + b32("12345678901234567890"),
		"sha256": "otpauth://totp/rfc?digits=8&algorithm=SHA256&secret=" + b32("12345678901234567890123456789012"),
		"sha512": "otpauth://totp/rfc?digits=8&algorithm=sha512&secret=" + strings.TrimRight(b32("1234567890123456789012345678901234567890123456789012345678901234"), "="),
	}
	token, _ := json.Marshal(uris)
	for _, tt := range []struct {
		unix                 int64
		sha1, sha256, sha512 string
	}{
		{59, "94287082", "46119246", "90693936"},
		{1111111109, "07081804", "68084774", "25091201"},
		{1111111111, "14050471", "67062674", "99943326"},
		{1234567890, "89005924", "91819424", "93441116"},
		{2000000000, "69279037", "90698825", "38618901"},
		{20000000000, "65353130", "77737706", "47863826"},
	} {
		s := vault.New(openStore(t), keyring(t, key1), &vault.Options{Now: func() time.Time { return time.Unix(tt.unix, 0) }})
		id := create(t, s, "alice", string(token))
		for entry, want := range map[string]string{"sha1": tt.sha1, "sha256": tt.sha256, "sha512": tt.sha512} {
			c, err := s.Code(t.Context(), "alice", id, entry)
			if err != nil {
				t.Fatal(err)
			}
			if c.Code != want {
				t.Errorf("%s at %d = %s, want %s", entry, tt.unix, c.Code, want)
			}
			if wantLeft := time.Duration(30-tt.unix%30) * time.Second; c.ValidFor != wantLeft {
				t.Errorf("%s at %d valid for %v, want %v", entry, tt.unix, c.ValidFor, wantLeft)
			}
		}
	}
}

func TestTokens(t *testing.T) {
	s := vault.New(openStore(t), keyring(t, key1), nil)
	for _, tt := range []struct {
		name, token string
		entries     string // sorted, comma-separated; empty for an error
		err         string
	}{
		{"bare seed", seed, vault.DefaultEntry, ""},
		{"bare seed, lower case, spaced", "jbsw y3dp ehpk 3pxp", vault.DefaultEntry, ""},
		{"bare uri", "otpauth://totp/GitHub:alice?secret=" + seed + "&issuer=GitHub", vault.DefaultEntry, ""},
		{"object", `{"b":"` + seed + `","a":"otpauth://totp/x?secret=` + seed + `&period=60"}`, "a,b", ""},
		{"empty", "  ", "", "empty"},
		{"not base32", "hunter2!", "", "not base32"},
		{"short seed", "JBSWY3DP", "", "10 to 128"},
		{"hotp", "otpauth://hotp/x?secret=" + seed, "", "only totp"},
		{"bad algorithm", "otpauth://totp/x?secret=" + seed + "&algorithm=MD5", "", "SHA1, SHA256 or SHA512"},
		{"bad digits", "otpauth://totp/x?secret=" + seed + "&digits=7", "", "6 or 8"},
		{"bad period", "otpauth://totp/x?secret=" + seed + "&period=0", "", "period"},
		{"no secret", "otpauth://totp/x?issuer=GitHub", "", "empty"},
		{"broken json", `{"a":`, "", "not a JSON object"},
		{"no entries", `{}`, "", "no entries"},
		{"number entry", `{"a":7}`, "", "must be a string"},
		{"bad entry", `{"a":"` + seed[:8] + `"}`, "", `entry "a"`},
		{"control in name", `{"a\u0001":"` + seed + `"}`, "", "printable"},
		{"too long", strings.Repeat(" ", vault.MaxTokenBytes+1), "", "longer than"},
		{"too many", manyEntries(vault.MaxEntries + 1), "", "at most"},
		{"not utf-8", "\xff" + seed, "", "UTF-8"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v, err := s.Create(t.Context(), "alice", &vault.CreateParams{Name: "n", Token: tt.token})
			if tt.err != "" {
				var inv *vault.InvalidError
				if !errors.As(err, &inv) || inv.Field != "token" || !strings.Contains(inv.Msg, tt.err) {
					t.Fatalf("err = %v, want an invalid token: %q", err, tt.err)
				}
				if strings.Contains(strings.ToUpper(err.Error()), seed[:16]) || strings.Contains(err.Error(), "hunter2") {
					t.Errorf("the error quotes the secret: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			names, err := s.Entries(t.Context(), "alice", v.ID)
			if err != nil || strings.Join(names, ",") != tt.entries {
				t.Errorf("entries = %v, %v; want %s", names, err, tt.entries)
			}
		})
	}
}

func manyEntries(n int) string {
	m := map[string]string{}
	for i := range n {
		m[fmt.Sprint(i)] = seed
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// TestCiphertextBound: a vault's ciphertext decrypts only in its own row:
// copied to another vault of the owner, or another owner's, or altered,
// it does not, and health says so.
func TestCiphertextBound(t *testing.T) {
	st := openStore(t)
	s := vault.New(st, keyring(t, key1), nil)
	ctx := t.Context()
	a := create(t, s, "alice", `{"a":"`+seed+`"}`)
	b := create(t, s, "alice", `{"b":"`+seed+`"}`)
	c := create(t, s, "bob", `{"c":"`+seed+`"}`)
	va, _ := st.GetVault(ctx, "alice", a)
	if strings.Contains(string(va.Secret), seed) || strings.Contains(string(va.Secret), `"a"`) || va.KeyID != "k1" {
		t.Fatalf("stored secret %q under %q: not ciphertext", va.Secret, va.KeyID)
	}
	overwrite := func(owner, id string, secret []byte) {
		v, err := st.GetVault(ctx, owner, id)
		if err != nil {
			t.Fatal(err)
		}
		v.Secret = secret
		if _, err := st.UpdateVault(ctx, v); err != nil {
			t.Fatal(err)
		}
	}
	overwrite("alice", b, va.Secret)
	overwrite("bob", c, va.Secret)
	flipped := append([]byte{}, va.Secret...)
	flipped[len(flipped)-1] ^= 1
	d := create(t, s, "alice", seed)
	overwrite("alice", d, flipped)
	e := create(t, s, "alice", seed)
	overwrite("alice", e, va.Secret[:10])
	for _, v := range []struct{ owner, id string }{{"alice", b}, {"bob", c}, {"alice", d}, {"alice", e}} {
		problem, err := s.Health(ctx, v.owner, v.id)
		if err != nil || !strings.Contains(problem, "cannot be decrypted") {
			t.Errorf("health of %s = %q, %v; want it cannot be decrypted", v.id, problem, err)
		}
		if _, err := s.Code(ctx, v.owner, v.id, "a"); err == nil {
			t.Errorf("a code from %s's copied ciphertext", v.id)
		}
	}
	if problem, err := s.Health(ctx, "alice", a); err != nil || problem != "" {
		t.Errorf("health of the original = %q, %v", problem, err)
	}
	// Another owner does not even find it.
	if _, err := s.Health(ctx, "bob", a); !errors.Is(err, vault.ErrNotFound) {
		t.Errorf("bob's health of alice's vault = %v, want ErrNotFound", err)
	}
}

// TestRotation: add a key as primary, re-encrypt, drop the old key.
func TestRotation(t *testing.T) {
	st := openStore(t)
	ctx := t.Context()
	old := vault.New(st, keyring(t, key1), nil)
	var ids []string
	for i := range 3 {
		ids = append(ids, create(t, old, fmt.Sprint("owner", i%2), seed))
	}
	// A vault under a key nobody has any more stays as it is.
	lost := vault.New(st, keyring(t, "k0:"+strings.Repeat("A", 43)+"="), nil)
	lostID := create(t, lost, "owner0", seed)

	both := vault.New(st, keyring(t, key2+","+key1), nil)
	if problem, err := both.Health(ctx, "owner0", ids[0]); problem != "" || err != nil {
		t.Fatalf("before re-encryption, the new keyring reads the old key: %q %v", problem, err)
	}
	done, failed, err := both.Reencrypt(ctx)
	if err != nil || done != 3 || failed != 1 {
		t.Fatalf("Reencrypt = %d, %d, %v; want 3 done, 1 failed", done, failed, err)
	}
	done, failed, err = both.Reencrypt(ctx)
	if err != nil || done != 0 || failed != 1 {
		t.Fatalf("Reencrypt again = %d, %d, %v; want nothing more done", done, failed, err)
	}
	newOnly := vault.New(st, keyring(t, key2), nil)
	oldOnly := vault.New(st, keyring(t, key1), nil)
	for i, id := range ids {
		owner := fmt.Sprint("owner", i%2)
		v, _ := st.GetVault(ctx, owner, id)
		if v.KeyID != "k2" {
			t.Errorf("%s is under %s after re-encryption", id, v.KeyID)
		}
		if problem, err := newOnly.Health(ctx, owner, id); problem != "" || err != nil {
			t.Errorf("the new key alone does not read %s: %q %v", id, problem, err)
		}
		if problem, _ := oldOnly.Health(ctx, owner, id); !strings.Contains(problem, `key "k2" is not configured`) {
			t.Errorf("the old key alone reads %s: %q", id, problem)
		}
	}
	if v, _ := st.GetVault(ctx, "owner0", lostID); v.KeyID != "k0" {
		t.Errorf("the undecryptable vault was changed: key %s", v.KeyID)
	}
}

// TestNotConfigured: without keys, nothing is stored.
func TestNotConfigured(t *testing.T) {
	st := openStore(t)
	s := vault.New(st, nil, nil)
	ctx := t.Context()
	id := "6f1c2a0e-1b2c-4d3e-8f90-123456789abc"
	_, err1 := s.Create(ctx, "alice", &vault.CreateParams{Name: "n", Token: seed})
	_, _, err2 := s.List(ctx, "alice", 0, 10)
	_, err3 := s.Get(ctx, "alice", id)
	err4 := s.SetToken(ctx, "alice", id, seed)
	_, err5 := s.Code(ctx, "alice", id, "a")
	_, _, err6 := s.Reencrypt(ctx)
	for i, err := range []error{err1, err2, err3, err4, err5, err6} {
		if !errors.Is(err, vault.ErrNotConfigured) {
			t.Errorf("call %d = %v, want ErrNotConfigured", i+1, err)
		}
	}
	if _, n, _ := st.ListVaults(ctx, &store.VaultListParams{Owner: "alice"}); n != 0 {
		t.Errorf("%d vaults stored without a key", n)
	}
}

func TestUpdate(t *testing.T) {
	s := vault.New(openStore(t), keyring(t, key1), nil)
	ctx := t.Context()
	id := create(t, s, "alice", seed)
	name := "renamed"
	v, err := s.Update(ctx, "alice", id, &vault.UpdateParams{Name: &name, Config: &vault.ProviderConfig{OpVaultID: "y"}})
	if err != nil || v.Name != name || string(v.Config) != `{"provider":"onepassword","op_vault_id":"y"}` || v.Secret != nil {
		t.Fatalf("Update = %+v, %v", v, err)
	}
	if same, err := s.Update(ctx, "alice", id, &vault.UpdateParams{}); err != nil || same.Version != v.Version || same.Name != name {
		t.Errorf("an empty update = %+v, %v; want the vault unchanged", same, err)
	}
	if _, err := s.Update(ctx, "bob", id, &vault.UpdateParams{Name: &name}); !errors.Is(err, vault.ErrNotFound) {
		t.Errorf("bob's update = %v, want ErrNotFound", err)
	}
	if _, err := s.Update(ctx, "alice", id, &vault.UpdateParams{Config: &vault.ProviderConfig{Provider: "vaultwarden"}}); err == nil {
		t.Error("another provider accepted")
	}
	if names, _ := s.Entries(ctx, "alice", id); len(names) != 1 {
		t.Errorf("the update changed the contents: %v", names)
	}
}

// call runs the one_time_code tool of ts.
func call(t *testing.T, ts *loop.Toolset, args string) (string, bool) {
	t.Helper()
	def, ok := ts.Lookup(vault.ToolName)
	if !ok {
		t.Fatal("no one_time_code tool")
	}
	out, err := def.Handler(context.Background(), &loop.Call{ID: "c1", Name: vault.ToolName, Arguments: json.RawMessage(args)})
	if err != nil {
		return err.Error(), true
	}
	var b strings.Builder
	for _, p := range out.Content {
		if p.Kind == llm.PartText {
			b.WriteString(p.Text)
		}
	}
	return b.String(), out.IsError
}

func TestTool(t *testing.T) {
	now := time.Unix(1111111109, 0)
	s := vault.New(openStore(t), keyring(t, key1), &vault.Options{Now: func() time.Time { return now }})
	rfc := base32.StdEncoding.EncodeToString([]byte("12345678901234567890"))
	a := create(t, s, "alice", `{"github":"otpauth://totp/x?digits=8&secret=`+rfc+`","shared":"`+seed+`"}`)
	b := create(t, s, "alice", `{"gitlab":"`+seed+`","shared":"`+seed+`"}`)
	gone := create(t, s, "alice", seed)
	bobs := create(t, s, "bob", `{"bob":"`+seed+`"}`)
	if err := s.Delete(t.Context(), "alice", gone); err != nil {
		t.Fatal(err)
	}
	ts := s.Tools("alice", []string{a, b, gone, bobs})
	for _, tt := range []struct {
		name, args, want string
		isErr            bool
	}{
		{"code", `{"entry":"github"}`, `{"entry":"github","vault":"` + a + `","code":"07081804","valid_for_s":1}`, false},
		{"in the named vault", `{"entry":"shared","vault":"` + b + `"}`, `"vault":"` + b + `"`, false},
		{"the vault in upper case", `{"entry":"shared","vault":"` + strings.ToUpper(b) + `"}`, `"vault":"` + b + `"`, false},
		{"the entry in another case", `{"entry":"GitHub"}`, `{"entry":"github","vault":"` + a + `","code":"07081804"`, false},
		{"unknown entry", `{"entry":"gmail"}`, `no vault entry "gmail" (the entries are: github, gitlab, shared)`, true},
		{"ambiguous", `{"entry":"shared"}`, `several vaults have an entry "shared"`, true},
		{"not a session vault", `{"entry":"github","vault":"6f1c2a0e-1b2c-4d3e-8f90-123456789abc"}`, "is not one of this session's vaults", true},
		{"another owner's vault, even named", `{"entry":"bob","vault":"` + bobs + `"}`, `no vault entry "bob"`, true},
		{"empty entry", `{"entry":" "}`, "entry is required", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, isErr := call(t, ts, tt.args)
			if isErr != tt.isErr || !strings.Contains(got, tt.want) {
				t.Errorf("got %s (error %v), want %s (error %v)", got, isErr, tt.want, tt.isErr)
			}
			if strings.Contains(got, seed[:16]) || strings.Contains(got, rfc[:16]) {
				t.Errorf("the result holds a seed: %s", got)
			}
		})
	}
}

// FuzzToken: any token is refused or stored; an error never quotes a
// single-secret token, and a stored token always makes codes.
func FuzzToken(f *testing.F) {
	for _, s := range []string{seed, "otpauth://totp/x?secret=" + seed + "&digits=8&algorithm=SHA512&period=60", `{"a":"` + seed + `"}`, `{"a":7}`, "otpauth://hotp/x", "{", "\x00"} {
		f.Add(s)
	}
	st, err := sqlite.Open(filepath.Join(f.TempDir(), "hrns.db"), &sqlite.Options{RelaxedSync: true})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	k, _ := vault.ParseKeys(key1)
	s := vault.New(st, k, nil)
	f.Fuzz(func(t *testing.T, token string) {
		v, err := s.Create(context.Background(), "o", &vault.CreateParams{Name: "n", Token: token})
		if err != nil {
			trimmed := strings.TrimSpace(token)
			if len(trimmed) >= 8 && !strings.HasPrefix(trimmed, "{") && strings.Contains(err.Error(), trimmed) {
				t.Fatalf("the error quotes the token: %v", err)
			}
			return
		}
		names, err := s.Entries(context.Background(), "o", v.ID)
		if err != nil || len(names) == 0 {
			t.Fatalf("a stored token has no entries: %v", err)
		}
		for _, n := range names {
			if _, err := s.Code(context.Background(), "o", v.ID, n); err != nil {
				t.Fatalf("entry %q makes no code: %v", n, err)
			}
		}
	})
}

func TestMaxPerOwner(t *testing.T) {
	s := vault.New(openStore(t), keyring(t, key1), &vault.Options{MaxPerOwner: 2})
	create(t, s, "alice", seed)
	create(t, s, "alice", seed)
	if _, err := s.Create(t.Context(), "alice", &vault.CreateParams{Name: "third", Token: seed}); !errors.Is(err, vault.ErrTooMany) {
		t.Errorf("a third vault: %v, want ErrTooMany", err)
	}
	create(t, s, "bob", seed) // another owner's bound is its own
}

// FuzzParseKeys: any text is a keyring or an error, never a panic; an
// error never quotes the text's keys.
func FuzzParseKeys(f *testing.F) {
	for _, s := range []string{key1, key2 + "," + key1, "# c\n" + key1 + "\n", "k:", ":", "q5Jc0cDUI2pV3ZjGZ4YAbKXm1nFbQPh3mR+H3Cw5W8s=", "k1:" + strings.Repeat("A", 44)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		k, err := vault.ParseKeys(text)
		if err != nil {
			for _, line := range strings.FieldsFunc(text, func(r rune) bool { return r == '\n' || r == ',' }) {
				_, enc, ok := strings.Cut(line, ":")
				if !ok {
					enc = line
				}
				if enc = strings.TrimSpace(enc); len(enc) >= 8 && strings.Contains(err.Error(), enc) {
					t.Fatalf("the error quotes a key: %v", err)
				}
			}
			return
		}
		if len(k.IDs()) == 0 || k.Primary() != k.IDs()[0] {
			t.Fatalf("a keyring without a primary: %v", k.IDs())
		}
	})
}
