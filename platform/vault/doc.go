// Package vault keeps the secrets that agents use without seeing them:
// vaults of TOTP seeds, encrypted at rest, and the one_time_code tool that
// gives an agent the current code of an entry, never the seed.
//
//	keys, err := vault.ParseKeys(os.Getenv("HRNS_VAULT_KEY"))
//	...
//	vaults := vault.New(st, keys, nil)
//	v, err := vaults.Create(ctx, owner, &vault.CreateParams{
//		Name:   "Support logins",
//		Config: vault.ProviderConfig{OpVaultID: "support"},
//		Token:  `{"github": "otpauth://totp/GitHub:alice?secret=JBSWY3DPEHPK3PXP&issuer=GitHub"}`,
//	})
//	m := session.New(st, model, &session.Options{Vaults: vaults.SessionTools()})
//
// # A vault
//
// A vault has the fields of the reference's vault config (a name and a
// provider_config, which hrns keeps and returns but does not act on: it
// contacts no password manager) and a token, its contents, which is
// written (at creation and by [Service.SetToken]) and never returned. The
// token is a JSON object whose members are the vault's entries, each a
// TOTP secret: an otpauth://totp/ URI (its secret, algorithm SHA1, SHA256
// or SHA512, digits 6 or 8, period), or a bare base32 seed (SHA-1, 6
// digits, 30 seconds). A token that is a single secret is one entry,
// named [DefaultEntry]. A token is validated before it is stored; errors
// name the entry and the problem, never the secret.
//
// # Encryption
//
// The store holds a vault's token only encrypted, with AES-256-GCM under
// the primary key of a [Keyring], a random nonce each time, and the
// vault's id and owner as associated data: a ciphertext copied to another
// vault's row, or another owner's, does not decrypt. Each ciphertext is
// stored with the id of its key, so a keyring may hold several keys: the
// primary encrypts, all decrypt. Rotation: add the new key first on every
// replica, make it primary, run [Service.Reencrypt] (hrns serve does at
// start), then drop the old key. Without a keyring every method returns
// [ErrNotConfigured]: nothing is ever written in plaintext.
//
// # One-time codes
//
// A session whose agent's environment names a vault (its vault_id, as the
// reference binds a vault to a browser) gets the one_time_code tool
// ([ToolName], [Service.Tools]): the agent names an entry and gets its
// current RFC 6238 code (computed with github.com/pquerna/otp) and how
// long it stays valid. The tool reads the vault at each call, with the
// session's owner: a session uses only its own API key's vaults. Its
// results and errors, and so the session's transcript, events and logs,
// never hold the seed.
package vault
