package vault

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
)

// KeySize is the size of a vault key: AES-256.
const KeySize = 32

// maxKeys bounds the keys of a keyring: a handful during a rotation.
const maxKeys = 16

// A Keyring holds the keys that encrypt vaults: the first, the primary,
// encrypts what is written; every key decrypts what it encrypted. A
// rotation adds a new key first, re-encrypts the vaults under it
// ([Service.Reencrypt]), then drops the old key.
//
// A Keyring is safe for concurrent use; it does not change once parsed.
type Keyring struct {
	// fixed at creation
	ids   []string
	aeads map[string]cipher.AEAD
}

var keyIDRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`) })

// ParseKeys reads a keyring from text: keys separated by newlines or
// commas, the primary first, each "ID:KEY" or "KEY", where KEY is 32 bytes
// in standard base64 (openssl rand -base64 32) and ID names it in what it
// encrypts (letters, digits, '.', '_', '-'; at most 64). A key without an
// ID gets one derived from the key ("k" and 12 hex digits of its SHA-256),
// the same every time. Blank lines and lines starting with # are skipped.
//
// Errors name the key by its position, never by its bytes.
func ParseKeys(text string) (*Keyring, error) {
	k := &Keyring{aeads: map[string]cipher.AEAD{}}
	n := 0
	for _, line := range strings.FieldsFunc(text, func(r rune) bool { return r == '\n' || r == ',' }) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		n++
		if n > maxKeys {
			return nil, fmt.Errorf("vault keys: more than %d keys", maxKeys)
		}
		id, enc, named := strings.Cut(line, ":")
		if !named {
			id, enc = "", line
		}
		raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(enc))
		if err != nil || len(raw) != KeySize {
			return nil, fmt.Errorf("vault keys: key %d is not %d bytes in standard base64 (make one with: openssl rand -base64 32)", n, KeySize)
		}
		if !named {
			sum := sha256.Sum256(raw)
			id = "k" + hex.EncodeToString(sum[:6])
		}
		id = strings.TrimSpace(id)
		if !keyIDRE().MatchString(id) {
			return nil, fmt.Errorf("vault keys: key %d has an invalid id (letters, digits, '.', '_' or '-', at most 64)", n)
		}
		if k.aeads[id] != nil {
			return nil, fmt.Errorf("vault keys: key %d: the id %q is used twice", n, id)
		}
		block, err := aes.NewCipher(raw)
		if err != nil {
			return nil, fmt.Errorf("vault keys: key %d: %w", n, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("vault keys: key %d: %w", n, err)
		}
		k.ids = append(k.ids, id)
		k.aeads[id] = aead
	}
	if len(k.ids) == 0 {
		return nil, errors.New("vault keys: no key")
	}
	return k, nil
}

// Primary returns the ID of the key that encrypts.
func (k *Keyring) Primary() string { return k.ids[0] }

// IDs returns the IDs of the keys, the primary first.
func (k *Keyring) IDs() []string { return append([]string{}, k.ids...) }

// errDecrypt is the one error of open: which check failed is not told.
var errDecrypt = errors.New("the vault cannot be decrypted")

// seal encrypts plaintext under the primary key, bound to aad: the
// ciphertext is a random nonce followed by the sealed bytes.
func (k *Keyring) seal(plaintext, aad []byte) (keyID string, ciphertext []byte, err error) {
	aead := k.aeads[k.ids[0]]
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plaintext)+aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return "", nil, err
	}
	return k.ids[0], aead.Seal(nonce, nonce, plaintext, aad), nil
}

// open decrypts what seal returned with the key keyID and the same aad.
func (k *Keyring) open(keyID string, ciphertext, aad []byte) ([]byte, error) {
	aead := k.aeads[keyID]
	if aead == nil {
		return nil, fmt.Errorf("%w: its key %q is not configured", errDecrypt, keyID)
	}
	if len(ciphertext) < aead.NonceSize()+aead.Overhead() {
		return nil, fmt.Errorf("%w: the ciphertext is truncated", errDecrypt)
	}
	n := aead.NonceSize()
	out, err := aead.Open(nil, ciphertext[:n], ciphertext[n:], aad)
	if err != nil {
		return nil, fmt.Errorf("%w with key %q: it was altered, or belongs to another vault", errDecrypt, keyID)
	}
	return out, nil
}

// Seal encrypts plaintext under the primary key, bound to aad (which
// [Keyring.Open] must be given again), and returns the key's ID with the
// ciphertext: a random nonce followed by the sealed bytes. It makes a
// Keyring a [session.Sealer], which encrypts the secrets of MCP servers
// at rest.
//
// [session.Sealer]: https://pkg.go.dev/github.com/hrns-dev/hrns/session#Sealer
func (k *Keyring) Seal(plaintext, aad []byte) (keyID string, ciphertext []byte, err error) {
	return k.seal(plaintext, aad)
}

// Open decrypts what [Keyring.Seal] returned with the key keyID (any key
// of the keyring: values an older key sealed still open after a
// rotation) and the same aad. Its error says which check failed no more
// than that the ciphertext does not open.
func (k *Keyring) Open(keyID string, ciphertext, aad []byte) ([]byte, error) {
	return k.open(keyID, ciphertext, aad)
}
