package vault_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/hrns-dev/hrns/platform/vault"
	"github.com/hrns-dev/hrns/store/sqlite"
)

// A vault of TOTP seeds, and the current code of one of its entries. The
// clock is fixed so that the code shown is the same every time.
func ExampleService_Code() {
	dir, _ := os.MkdirTemp("", "vault-example")
	defer os.RemoveAll(dir)
	st, err := sqlite.Open(filepath.Join(dir, "hrns.db"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()

	// The operator's key: HRNS_VAULT_KEY, or a file of mode 0600.
	keys, err := vault.ParseKeys("2026-06:q5Jc0cDUI2pV3ZjGZ4YAbKXm1nFbQPh3mR+H3Cw5W8s=")
	if err != nil {
		log.Fatal(err)
	}
	clock := func() time.Time { return time.Date(2026, 6, 1, 15, 14, 5, 0, time.UTC) }
	vaults := vault.New(st, keys, &vault.Options{Now: clock})

	ctx := context.Background()
	v, err := vaults.Create(ctx, "key:alice", &vault.CreateParams{
		Name:   "Support logins",
		Config: vault.ProviderConfig{OpVaultID: "support"},
		Token:  `{"github": "otpauth://totp/GitHub:alice?secret=JBSWY3DPEHPK3PXP&issuer=GitHub"}`,
	})
	if err != nil {
		log.Fatal(err)
	}
	code, err := vaults.Code(ctx, "key:alice", v.ID, "github")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(code.Code, code.ValidFor)
	// Output:
	// 504394 25s
}
