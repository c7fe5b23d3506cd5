package vault

import (
	"encoding/base32"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/pquerna/otp"
	"github.com/pquerna/otp/totp"
)

// Bounds of a vault's contents (its token).
const (
	// MaxTokenBytes bounds a vault's token.
	MaxTokenBytes = 64 << 10
	// MaxEntries bounds the entries of a vault.
	MaxEntries = 100
	// MaxEntryName bounds an entry's name, in bytes.
	MaxEntryName = 128
)

// DefaultEntry names the one entry of a token that is a single TOTP secret
// rather than an object of entries.
const DefaultEntry = "default"

// A totpKey is one entry of a vault: a TOTP secret and its parameters.
type totpKey struct {
	secret string // base32, upper case, unpadded
	digits otp.Digits
	period uint
	algo   otp.Algorithm
}

// contents are the entries of a vault, by name.
type contents map[string]*totpKey

// names returns the entry names, sorted.
func (c contents) names() []string {
	out := make([]string, 0, len(c))
	for n := range c {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// parseToken reads a vault's token: a JSON object whose members are the
// vault's entries, each a TOTP secret (an otpauth://totp/ URI, or a base32
// seed for SHA-1, 6 digits and 30 seconds); or a single such secret, the
// entry DefaultEntry.
//
// Errors never quote the token: they name the entry and what is wrong.
func parseToken(token string) (contents, error) {
	if len(token) > MaxTokenBytes {
		return nil, fmt.Errorf("the token is longer than %d bytes", MaxTokenBytes)
	}
	if !utf8.ValidString(token) {
		return nil, fmt.Errorf("the token is not valid UTF-8")
	}
	t := strings.TrimSpace(token)
	if t == "" {
		return nil, fmt.Errorf("the token is empty")
	}
	if !strings.HasPrefix(t, "{") {
		k, err := parseSecret(t)
		if err != nil {
			return nil, fmt.Errorf("the token is neither a JSON object of entries nor a TOTP secret: %v", err)
		}
		return contents{DefaultEntry: k}, nil
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(t), &raw); err != nil {
		// The decoder's message may quote a character of the token.
		return nil, fmt.Errorf("the token starts with { but is not a JSON object of entries")
	}
	if len(raw) == 0 {
		return nil, fmt.Errorf("the token has no entries")
	}
	if len(raw) > MaxEntries {
		return nil, fmt.Errorf("the token has %d entries; at most %d", len(raw), MaxEntries)
	}
	out := contents{}
	for name, v := range raw {
		if err := checkEntryName(name); err != nil {
			return nil, err
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return nil, fmt.Errorf("entry %q: its value must be a string (an otpauth://totp/ URI or a base32 seed)", name)
		}
		k, err := parseSecret(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("entry %q: %v", name, err)
		}
		out[name] = k
	}
	return out, nil
}

// checkEntryName accepts printable names of 1 to MaxEntryName bytes.
func checkEntryName(name string) error {
	if name == "" || len(name) > MaxEntryName {
		return fmt.Errorf("an entry name must have 1 to %d bytes", MaxEntryName)
	}
	for _, r := range name {
		if !unicode.IsPrint(r) {
			return fmt.Errorf("entry %q: a name must be printable characters", name)
		}
	}
	return nil
}

// parseSecret reads an otpauth://totp/ URI or a base32 seed.
func parseSecret(s string) (*totpKey, error) {
	if !strings.HasPrefix(strings.ToLower(s), "otpauth:") {
		seed, err := parseSeed(s)
		if err != nil {
			return nil, err
		}
		return &totpKey{secret: seed, digits: otp.DigitsSix, period: 30, algo: otp.AlgorithmSHA1}, nil
	}
	u, err := url.Parse(s)
	if err != nil || !strings.EqualFold(u.Scheme, "otpauth") {
		return nil, fmt.Errorf("not a valid otpauth:// URI")
	}
	if !strings.EqualFold(u.Host, "totp") {
		return nil, fmt.Errorf("an otpauth URI of type %q: only totp (time-based codes) is supported", u.Host)
	}
	q := u.Query()
	seed, err := parseSeed(q.Get("secret"))
	if err != nil {
		return nil, fmt.Errorf("the URI's secret: %v", err)
	}
	k := &totpKey{secret: seed, digits: otp.DigitsSix, period: 30, algo: otp.AlgorithmSHA1}
	switch strings.ToUpper(q.Get("algorithm")) {
	case "", "SHA1":
	case "SHA256":
		k.algo = otp.AlgorithmSHA256
	case "SHA512":
		k.algo = otp.AlgorithmSHA512
	default:
		return nil, fmt.Errorf("the URI's algorithm must be SHA1, SHA256 or SHA512")
	}
	switch q.Get("digits") {
	case "", "6":
	case "8":
		k.digits = otp.DigitsEight
	default:
		return nil, fmt.Errorf("the URI's digits must be 6 or 8")
	}
	if p := q.Get("period"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 3600 {
			return nil, fmt.Errorf("the URI's period must be 1 to 3600 seconds")
		}
		k.period = uint(n)
	}
	return k, nil
}

// parseSeed reads a base32 seed (any case, spaces and padding allowed) of
// 10 to 128 bytes: 80 bits is the least services issue, RFC 4226 asks for
// 128 and recommends 160.
func parseSeed(s string) (string, error) {
	s = strings.ToUpper(strings.Map(func(r rune) rune {
		if r == ' ' || r == '-' || r == '=' {
			return -1
		}
		return r
	}, s))
	if s == "" {
		return "", fmt.Errorf("the secret is empty")
	}
	enc := base32.StdEncoding.WithPadding(base32.NoPadding)
	raw, err := enc.DecodeString(s)
	if err != nil || enc.EncodeToString(raw) != s {
		// A length no byte count encodes to is refused too.
		return "", fmt.Errorf("the secret is not base32")
	}
	if len(raw) < 10 || len(raw) > 128 {
		return "", fmt.Errorf("the secret is %d bytes; a TOTP secret has 10 to 128", len(raw))
	}
	return s, nil
}

// code returns the key's code at t and how long it stays valid.
func (k *totpKey) code(t time.Time) (string, time.Duration, error) {
	c, err := totp.GenerateCodeCustom(k.secret, t, totp.ValidateOpts{Period: k.period, Digits: k.digits, Algorithm: k.algo})
	if err != nil {
		return "", 0, fmt.Errorf("the entry's secret cannot make a code")
	}
	p := int64(k.period)
	left := time.Duration(p-t.Unix()%p) * time.Second
	return c, left, nil
}
