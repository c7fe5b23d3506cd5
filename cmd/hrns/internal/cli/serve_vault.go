package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/hrns-dev/hrns/platform/vault"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store"
)

// vaultKeyEnv holds the vault keys of hrns serve (see vault.ParseKeys).
const vaultKeyEnv = "HRNS_VAULT_KEY"

// maxVaultKeyFile bounds a vault key file: a handful of keys.
const maxVaultKeyFile = 64 << 10

// vaultKeys returns the keyring of HRNS_VAULT_KEY or --vault-key-file,
// nil when neither is set. Giving both is refused: which key is primary
// must not depend on an order of precedence. Like the API keys, the
// variable is removed from the environment once read, and the file must
// be a regular file only its owner may read.
func (o *serveOptions) vaultKeys(stdio *IO) (*vault.Keyring, error) {
	env := stdio.getenv(vaultKeyEnv)
	if stdio.Getenv == nil {
		os.Unsetenv(vaultKeyEnv)
	}
	var text string
	switch {
	case env != "" && o.vaultKeyFile != "":
		return nil, usagef("both %s and --vault-key-file are set: give the vault keys one way", vaultKeyEnv)
	case env != "":
		text = env
	case o.vaultKeyFile != "":
		b, err := readSecretFile(o.vaultKeyFile)
		if err != nil {
			return nil, usagef("--vault-key-file: %v", err)
		}
		text = string(b)
	default:
		return nil, nil
	}
	k, err := vault.ParseKeys(text)
	if err != nil {
		return nil, usagef("%v", err)
	}
	return k, nil
}

// readSecretFile reads a small file that only its owner may read or
// write.
func readSecretFile(path string) (_ []byte, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%s is readable by others (mode %v): run chmod 600 %s", path, fi.Mode().Perm(), path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxVaultKeyFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxVaultKeyFile {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, maxVaultKeyFile)
	}
	return b, nil
}

// setupVaults gives the sessions of opts the vaults of st, encrypted with
// keys (none: the vault routes say they are off, and sessions naming a
// vault are refused), and re-encrypts under the primary key the vaults an
// older key encrypted: the middle step of a rotation.
func setupVaults(ctx context.Context, st store.Store, keys *vault.Keyring, opts *session.Options, log *slog.Logger, stderr io.Writer) (*vault.Service, error) {
	svc := vault.New(st, keys, &vault.Options{Logger: log})
	if keys == nil {
		fmt.Fprintf(stderr, "hrns serve: vaults are off: set %s or --vault-key-file to enable them\n", vaultKeyEnv)
		return svc, nil
	}
	opts.Vaults = svc.SessionTools()
	rctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	done, failed, err := svc.Reencrypt(rctx)
	if err != nil {
		return nil, fmt.Errorf("re-encrypting the vaults under key %s: %w", keys.Primary(), err)
	}
	fmt.Fprintf(stderr, "hrns serve: vaults are encrypted with key %s (%d keys configured)\n", keys.Primary(), len(keys.IDs()))
	if done > 0 {
		fmt.Fprintf(stderr, "hrns serve: %d vaults re-encrypted under key %s\n", done, keys.Primary())
	}
	if failed > 0 {
		fmt.Fprintf(stderr, "hrns serve: %d vaults cannot be decrypted with the configured keys (their key was dropped?); they stay as they are and report it in GET /api/v2/vaults/{id}/health\n", failed)
	}
	return svc, nil
}

// mcpReencryptTimeout bounds the re-encryption of MCP servers' secrets at
// start: a start that takes longer serves, and the next one goes on.
const mcpReencryptTimeout = 30 * time.Minute

// reencryptMCPSecrets re-encrypts under the primary key the env and
// headers values of MCP servers that an older key encrypted (sessions,
// registered agents and environments, schedules): the middle step of a
// rotation, as for the vaults, and says how many it did and how many
// still need another key. Finding them reads every session's request and
// state, so it runs only while a rotation is under way: with a single
// key, no value of another could be re-encrypted.
func reencryptMCPSecrets(ctx context.Context, m *session.Manager, keys *vault.Keyring, stderr io.Writer) error {
	if keys == nil || len(keys.IDs()) < 2 {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, mcpReencryptTimeout)
	defer cancel()
	r, err := m.ReencryptMCPSecrets(rctx)
	if err != nil && (ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded)) {
		return err
	}
	if r.Values > 0 {
		fmt.Fprintf(stderr, "hrns serve: %d MCP server values re-encrypted under key %s (%d sessions, %d registered agents and environments, %d schedules)\n", r.Values, keys.Primary(), r.Sessions, r.Entries, r.Schedules)
	}
	if err != nil {
		fmt.Fprintf(stderr, "hrns serve: the re-encryption of MCP server values stopped after %v; the next start goes on with it\n", mcpReencryptTimeout)
	}
	if r.Failed > 0 {
		fmt.Fprintf(stderr, "hrns serve: %d MCP server values (in %d sessions, registered agents and environments or schedules) cannot be decrypted with the configured keys (their key was dropped?); they stay as they are: a session's run leaves their server out, saying so, and a definition holding one is refused (422); GET /healthz with an operator key counts them\n", r.Failed, r.Undecryptable)
	}
	if r.Skipped > 0 {
		fmt.Fprintf(stderr, "hrns serve: %d sessions, registered entries or schedules holding MCP server values of another key were left as they are (changed at each attempt, or unreadable); restart again before dropping that key\n", r.Skipped)
	}
	return nil
}
