package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Vault keys made up for the tests.
const (
	testVaultKey1 = "k1:q5Jc0cDUI2pV3ZjGZ4YAbKXm1nFbQPh3mR+H3Cw5W8s="
	testVaultKey2 = "k2:Zm9ydHktdHdvIGJ5dGVzIG9mIGEgbWFkZS11cCBrZXk="
)

func TestServeVaultKeyErrors(t *testing.T) {
	dir := t.TempDir()
	open := filepath.Join(dir, "open.key")
	os.WriteFile(open, []byte(testVaultKey1+"\n"), 0o644)
	private := filepath.Join(dir, "private.key")
	os.WriteFile(private, []byte(testVaultKey1+"\n"), 0o600)
	bad := filepath.Join(dir, "bad.key")
	os.WriteFile(bad, []byte("k1:c2hvcnQtc2VjcmV0LWtleQ==\n"), 0o600)
	db := "sqlite:" + filepath.Join(dir, "h.db")
	work := t.TempDir()
	inWork := filepath.Join(work, "vault.key")
	os.WriteFile(inWork, []byte(testVaultKey1+"\n"), 0o600)
	for _, tt := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"file readable by others", nil, []string{"--vault-key-file", open}, "chmod 600"},
		{"missing file", nil, []string{"--vault-key-file", filepath.Join(dir, "none")}, "--vault-key-file"},
		{"a directory", nil, []string{"--vault-key-file", dir}, "not a regular file"},
		{"both", map[string]string{vaultKeyEnv: testVaultKey1}, []string{"--vault-key-file", private}, "give the vault keys one way"},
		{"bad key in file", nil, []string{"--vault-key-file", bad}, "key 1 is not 32 bytes"},
		{"file in the workdir", nil, []string{"--workdir", work, "--vault-key-file", inWork}, "is inside --workdir"},
		{"bad key in env", map[string]string{vaultKeyEnv: "k1:c2hvcnQtc2VjcmV0LWtleQ=="}, nil, "key 1 is not 32 bytes"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, stderr := runServe(t, tt.env, append([]string{"--db", db}, tt.args...)...)
			if code != ExitUsage || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr, ExitUsage, tt.want)
			}
			for _, k := range []string{"q5Jc0cDUI2pV3ZjGZ4YAbKXm1nFbQPh3mR", "c2hvcnQtc2VjcmV0"} {
				if strings.Contains(stderr, k) {
					t.Errorf("stderr quotes a key: %q", stderr)
				}
			}
		})
	}
}

// vaultRequest sends a vault request of key sk-a to s.
func vaultRequest(t *testing.T, s *servingCmd, method, path, body string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequestWithContext(t.Context(), method, s.url+path, rd)
	req.Header.Set("Authorization", "Bearer sk-a")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// TestServeVaultRotation follows the documented rotation: a vault written
// under k1; k2 added as primary, which re-encrypts it at start; k1
// dropped, and the vault still reads. Without a key, the routes say how
// to enable them.
func TestServeVaultRotation(t *testing.T) {
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "h.db")
	keyFile := filepath.Join(dir, "vault.key")
	env := func(key string) map[string]string {
		return map[string]string{"OPENAI_API_KEY": "k", "HRNS_API_KEYS": "sk-a", vaultKeyEnv: key}
	}
	var id string
	t.Run("k1", func(t *testing.T) {
		s := startServe(t, env(testVaultKey1), "--model", "m", "--db", db)
		code, body := vaultRequest(t, s, "POST", "/api/v2/vaults", `{"name":"logins","provider_config":{"op_vault_id":"x"},"token":"JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP"}`)
		if code != http.StatusCreated {
			t.Fatalf("create: %d %s", code, body)
		}
		var v struct{ ID string }
		json.Unmarshal(body, &v)
		id = v.ID
		if !strings.Contains(s.logs.String(), "vaults are encrypted with key k1") {
			t.Errorf("logs: %s", s.logs.String())
		}
	})
	t.Run("k2 added", func(t *testing.T) {
		os.WriteFile(keyFile, []byte("# June's rotation\n"+testVaultKey2+"\n"+testVaultKey1+"\n"), 0o600)
		s := startServe(t, map[string]string{"OPENAI_API_KEY": "k", "HRNS_API_KEYS": "sk-a"}, "--model", "m", "--db", db, "--vault-key-file", keyFile)
		if !strings.Contains(s.logs.String(), "1 vaults re-encrypted under key k2") {
			t.Errorf("logs: %s", s.logs.String())
		}
	})
	t.Run("k1 dropped", func(t *testing.T) {
		s := startServe(t, env(testVaultKey2), "--model", "m", "--db", db)
		code, body := vaultRequest(t, s, "GET", "/api/v2/vaults/"+id+"/health", "")
		if code != http.StatusOK || !bytes.Contains(body, []byte(`"ok":true`)) {
			t.Errorf("health under k2 alone: %d %s", code, body)
		}
	})
	t.Run("k1 alone again", func(t *testing.T) {
		s := startServe(t, env(testVaultKey1), "--model", "m", "--db", db)
		code, body := vaultRequest(t, s, "GET", "/api/v2/vaults/"+id+"/health", "")
		if code != http.StatusOK || !bytes.Contains(body, []byte(`"ok":false`)) || !bytes.Contains(body, []byte(`k2`)) {
			t.Errorf("health under k1 alone: %d %s", code, body)
		}
		if !strings.Contains(s.logs.String(), "1 vaults cannot be decrypted") {
			t.Errorf("logs: %s", s.logs.String())
		}
	})
	t.Run("no key", func(t *testing.T) {
		s := startServe(t, env(""), "--model", "m", "--db", db)
		code, body := vaultRequest(t, s, "GET", "/api/v2/vaults", "")
		if code != http.StatusNotImplemented || !bytes.Contains(body, []byte(vaultKeyEnv)) {
			t.Errorf("without a key: %d %s", code, body)
		}
		if !strings.Contains(s.logs.String(), "vaults are off") {
			t.Errorf("logs: %s", s.logs.String())
		}
	})
}

// TestServeUnsetsVaultKeyVariable: hrns serve removes HRNS_VAULT_KEY from
// its environment once read, as it does HRNS_API_KEYS, and uses the key.
func TestServeUnsetsVaultKeyVariable(t *testing.T) {
	home := t.TempDir()
	for k, v := range map[string]string{"HOME": home, "XDG_CONFIG_HOME": home, "HRNS_CONFIG": "", "OPENAI_API_KEY": "k", "HRNS_API_KEYS": "sk-a", vaultKeyEnv: testVaultKey1} {
		t.Setenv(k, v)
	}
	s := startServe(t, nil, "--model", "m", "--db", "sqlite:"+filepath.Join(t.TempDir(), "h.db"))
	if _, ok := os.LookupEnv(vaultKeyEnv); ok {
		t.Errorf("%s is still in the environment", vaultKeyEnv)
	}
	if code, body := vaultRequest(t, s, "GET", "/api/v2/vaults", ""); code != http.StatusOK {
		t.Errorf("vaults with the key of the environment: %d %s", code, body)
	}
}
