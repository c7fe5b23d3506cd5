package webhook

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"
)

// SecretPrefix begins every signing secret: "whsec_" and the base64 of 32
// random bytes, the key of the HMAC.
const SecretPrefix = "whsec_"

// NewSecret returns a new signing secret.
func NewSecret() string {
	var b [32]byte
	rand.Read(b[:])
	return SecretPrefix + base64.StdEncoding.EncodeToString(b[:])
}

// secretKey returns the HMAC key of a secret.
func secretKey(secret string) ([]byte, error) {
	rest, ok := strings.CutPrefix(secret, SecretPrefix)
	if !ok {
		return nil, errors.New("webhook: a secret begins with " + SecretPrefix)
	}
	key, err := base64.StdEncoding.DecodeString(rest)
	if err != nil || len(key) == 0 {
		return nil, errors.New("webhook: a secret is " + SecretPrefix + " and base64")
	}
	return key, nil
}

// Sign returns the signature of a delivery as the webhook-signature header
// carries it: "v1," and the base64 of HMAC-SHA256(key, id "." timestamp
// "." body), where key is the decoded secret and timestamp the Unix
// seconds of the webhook-timestamp header (Standard Webhooks 1.0).
func Sign(secret, id string, timestamp time.Time, body []byte) (string, error) {
	key, err := secretKey(secret)
	if err != nil {
		return "", err
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id))
	mac.Write([]byte{'.'})
	mac.Write([]byte(strconv.FormatInt(timestamp.Unix(), 10)))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil)), nil
}

// signatures returns the webhook-signature header of a delivery at now:
// the signature with the secret and, while a rotation's overlap lasts,
// with the previous one, space-separated.
func signatures(secret, previous string, previousUntil time.Time, id string, now time.Time, body []byte) (string, error) {
	sig, err := Sign(secret, id, now, body)
	if err != nil {
		return "", err
	}
	if previous != "" && now.Before(previousUntil) {
		old, err := Sign(previous, id, now, body)
		if err != nil {
			return "", err
		}
		sig += " " + old
	}
	return sig, nil
}

// The headers of H's signature scheme, which H Company's SDKs verify
// (verify_webhook): the Unix seconds of the attempt, and [SignH]'s
// signature.
const (
	HTimestampHeader = "X-H-Webhook-Timestamp"
	HSignatureHeader = "X-H-Webhook-Signature"
)

// SignH returns the signature of a delivery as H's X-H-Webhook-Signature
// header carries it: "sha256=" and the hex of HMAC-SHA256(key, timestamp
// "." body), where key is the bytes of the whole secret as the API
// returned it ("whsec_" included) and timestamp the Unix seconds of the
// X-H-Webhook-Timestamp header.
func SignH(secret string, timestamp time.Time, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(strconv.FormatInt(timestamp.Unix(), 10)))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// hSignature returns the X-H-Webhook-Signature header of a delivery at
// now. The header holds one signature (H's receivers compare it whole), so
// while a rotation's overlap lasts it is made with the previous secret,
// which receivers not yet given the new one still hold; a receiver given
// the new secret during the overlap verifies with both (H's
// verify_webhook takes a list), and with the new one alone afterwards.
func hSignature(secret, previous string, previousUntil time.Time, now time.Time, body []byte) string {
	if previous != "" && now.Before(previousUntil) {
		secret = previous
	}
	return SignH(secret, now, body)
}
