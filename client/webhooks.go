package client

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/hrns-dev/hrns/api"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The webhooks API's values, as the server takes and returns them.
type (
	// Webhook is a webhook as reads show it, without its secret.
	Webhook = api.Webhook
	// WebhookWithSecret is a webhook with its signing secret: what
	// CreateWebhook and RotateWebhookSecret return, and nothing else.
	WebhookWithSecret = api.WebhookWithSecret
	// WebhookPage is a page of webhooks.
	WebhookPage = api.WebhookPage
	// CreateWebhookParams are the fields of a new webhook.
	CreateWebhookParams = api.WebhookCreate
	// UpdateWebhookParams change the fields that are not nil.
	UpdateWebhookParams = api.WebhookUpdate
	// WebhookEventType is an event type a webhook may subscribe to.
	WebhookEventType = api.WebhookEventType
	// WebhookDeliveryPage is a page of a webhook's delivery log.
	WebhookDeliveryPage = api.WebhookDeliveryPage
	// WebhookSessionData is the data of a session event's delivery.
	WebhookSessionData = api.WebhookSessionData
)

const webhooksPath = "/api/v2/webhooks"

// CreateWebhook registers a webhook for this key. The secret it returns
// is shown only here (and by RotateWebhookSecret): keep it where the
// receiver can read it. An invalid URL or event type answers [ErrInvalid].
func (c *Client) CreateWebhook(ctx context.Context, p *CreateWebhookParams) (*WebhookWithSecret, error) {
	return send[WebhookWithSecret](ctx, c, "POST", webhooksPath, p, false)
}

// ListWebhooks returns a page (from 1) of size (1 to 1000, 0 for 10)
// webhooks of this key, newest first.
func (c *Client) ListWebhooks(ctx context.Context, page, size int) (*WebhookPage, error) {
	q := url.Values{}
	if page > 0 {
		q.Set("page", strconv.Itoa(page))
	}
	if size > 0 {
		q.Set("size", strconv.Itoa(size))
	}
	path := webhooksPath
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	return send[WebhookPage](ctx, c, "GET", path, nil, true)
}

// WebhookEventTypes lists the event types a webhook may subscribe to.
func (c *Client) WebhookEventTypes(ctx context.Context) ([]WebhookEventType, error) {
	out, err := send[[]WebhookEventType](ctx, c, "GET", webhooksPath+"/events", nil, true)
	if err != nil {
		return nil, err
	}
	return *out, nil
}

func webhookPath(id string, rest string) string {
	return webhooksPath + "/" + url.PathEscape(id) + rest
}

// GetWebhook returns a webhook of this key ([ErrNotFound] for another's).
func (c *Client) GetWebhook(ctx context.Context, id string) (*Webhook, error) {
	return send[Webhook](ctx, c, "GET", webhookPath(id, ""), nil, true)
}

// UpdateWebhook changes the fields p sets; Disabled false enables a
// webhook again (and resets its count of failures).
func (c *Client) UpdateWebhook(ctx context.Context, id string, p *UpdateWebhookParams) (*Webhook, error) {
	return send[Webhook](ctx, c, "PATCH", webhookPath(id, ""), p, false)
}

// DeleteWebhook removes a webhook and its delivery log.
func (c *Client) DeleteWebhook(ctx context.Context, id string) error {
	_, _, err := c.call(ctx, "DELETE", webhookPath(id, ""), nil, nil, nil, false)
	return err
}

// RotateWebhookSecret replaces the webhook's secret and returns the new
// one. The server signs deliveries with both the new and the old secret
// for its overlap window (24 hours unless the operator changed it): make
// the receiver accept the new one within it.
func (c *Client) RotateWebhookSecret(ctx context.Context, id string) (*WebhookWithSecret, error) {
	return send[WebhookWithSecret](ctx, c, "POST", webhookPath(id, "/rotate"), nil, false)
}

// PingWebhook has the server send a signed webhook.ping event to the
// webhook now and returns the receiver's HTTP status. A ping that got no
// answer (refused address, timeout) is an [*APIError] with status 502.
func (c *Client) PingWebhook(ctx context.Context, id string) (int, error) {
	out, err := send[struct {
		ResponseStatus int `json:"response_status"`
	}](ctx, c, "POST", webhookPath(id, "/ping"), nil, false)
	if err != nil {
		return 0, err
	}
	return out.ResponseStatus, nil
}

// WebhookDeliveries returns a page (from 1) of the webhook's delivery log,
// newest first, each delivery with its attempts; state, when set, keeps
// the "pending", "delivered" or "failed" ones.
func (c *Client) WebhookDeliveries(ctx context.Context, id, state string, page, size int) (*WebhookDeliveryPage, error) {
	q := url.Values{}
	if state != "" {
		q.Set("state", state)
	}
	if page > 0 {
		q.Set("page", strconv.Itoa(page))
	}
	if size > 0 {
		q.Set("size", strconv.Itoa(size))
	}
	path := webhookPath(id, "/deliveries")
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	return send[WebhookDeliveryPage](ctx, c, "GET", path, nil, true)
}

// Errors of [VerifyWebhook].
var (
	// ErrWebhookSignature: no signature of the request was made with the
	// secrets, or the headers are missing or malformed.
	ErrWebhookSignature = errors.New("webhook: no valid signature")
	// ErrWebhookTimestamp: the request was signed too long ago (or in
	// the future): a replay, or a clock far off.
	ErrWebhookTimestamp = errors.New("webhook: timestamp outside the tolerance")
)

// WebhookTolerance is how far from now VerifyWebhook accepts a delivery's
// timestamp by default.
const WebhookTolerance = 5 * time.Minute

// VerifyOptions refine [VerifyWebhook]. A nil *VerifyOptions means the
// defaults.
type VerifyOptions struct {
	// Now is the time to check the timestamp against; zero means
	// time.Now().
	Now time.Time
	// Tolerance bounds the distance of the timestamp from Now; 0 means
	// WebhookTolerance.
	Tolerance time.Duration
}

// Limits of what VerifyWebhook reads from headers an attacker may send.
const (
	maxSignatureHeader = 4096
	maxSignatures      = 16
)

// VerifyWebhook checks that a delivery of hrns serve was signed with one
// of secrets (during a rotation, pass the new and the old one): header
// and body are the request's, body exactly as received, before any JSON
// decoding. It returns the event id (the webhook-id header, or the body's
// id, the same on every attempt of one event: deduplicate on it), or an
// error wrapping ErrWebhookSignature or ErrWebhookTimestamp.
//
// hrns signs each delivery twice, and either signature is enough:
//
//   - Standard Webhooks 1.0, checked when the webhook-signature header is
//     present: webhook-signature holds space-separated "v1,BASE64" values,
//     each the HMAC-SHA256 of "ID.TIMESTAMP.BODY" with the base64-decoded
//     part of a "whsec_" secret.
//   - H's scheme otherwise (the headers H's SDKs read):
//     X-H-Webhook-Signature is "sha256=" and the hex HMAC-SHA256 of
//     "TIMESTAMP.BODY" keyed with the whole secret string, TIMESTAMP being
//     X-H-Webhook-Timestamp; the event id is then the body's "id".
func VerifyWebhook(header http.Header, body []byte, opts *VerifyOptions, secrets ...string) (string, error) {
	var o VerifyOptions
	if opts != nil {
		o = *opts
	}
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	if o.Tolerance <= 0 {
		o.Tolerance = WebhookTolerance
	}
	if header.Get("webhook-signature") == "" && header.Get(HSignatureHeader) != "" {
		return verifyH(header, body, &o, secrets)
	}
	id, ts, sigs := header.Get("webhook-id"), header.Get("webhook-timestamp"), header.Get("webhook-signature")
	if id == "" || ts == "" || sigs == "" {
		return "", fmt.Errorf("%w: missing webhook-id, webhook-timestamp or webhook-signature", ErrWebhookSignature)
	}
	if len(sigs) > maxSignatureHeader || len(id) > 256 {
		return "", fmt.Errorf("%w: header too long", ErrWebhookSignature)
	}
	if err := checkTimestamp(ts, &o); err != nil {
		return "", err
	}
	var macs [][]byte
	for _, secret := range secrets {
		rest, ok := strings.CutPrefix(secret, "whsec_")
		key, err := base64.StdEncoding.DecodeString(rest)
		if !ok || err != nil || len(key) == 0 {
			return "", fmt.Errorf("webhook: a secret is whsec_ and base64")
		}
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(id + "." + ts + "."))
		mac.Write(body)
		macs = append(macs, mac.Sum(nil))
	}
	for i, sig := range strings.Fields(sigs) {
		if i >= maxSignatures {
			break
		}
		version, value, ok := strings.Cut(sig, ",")
		if !ok || version != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(value)
		if err != nil {
			continue
		}
		for _, want := range macs {
			if hmac.Equal(got, want) {
				return id, nil
			}
		}
	}
	return "", ErrWebhookSignature
}

// The headers of H's signature scheme, which H's SDKs verify.
const (
	HTimestampHeader = "X-H-Webhook-Timestamp"
	HSignatureHeader = "X-H-Webhook-Signature"
)

// checkTimestamp checks Unix seconds ts against o's clock and tolerance.
func checkTimestamp(ts string, o *VerifyOptions) error {
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: timestamp %q is not Unix seconds", ErrWebhookSignature, ts)
	}
	if d := o.Now.Sub(time.Unix(sec, 0)); d > o.Tolerance || d < -o.Tolerance {
		return fmt.Errorf("%w: signed at %s, %s from now", ErrWebhookTimestamp, time.Unix(sec, 0).UTC().Format(time.RFC3339), d.Round(time.Second))
	}
	return nil
}

// verifyH is VerifyWebhook for H's scheme.
func verifyH(header http.Header, body []byte, o *VerifyOptions, secrets []string) (string, error) {
	ts, sig := header.Get(HTimestampHeader), header.Get(HSignatureHeader)
	if ts == "" || len(sig) > maxSignatureHeader {
		return "", fmt.Errorf("%w: missing %s, or a header too long", ErrWebhookSignature, HTimestampHeader)
	}
	if err := checkTimestamp(ts, o); err != nil {
		return "", err
	}
	hexSig, ok := strings.CutPrefix(sig, "sha256=")
	got, err := hex.DecodeString(hexSig)
	if !ok || err != nil {
		return "", fmt.Errorf("%w: %s is not sha256=HEX", ErrWebhookSignature, HSignatureHeader)
	}
	matched := false
	for _, secret := range secrets {
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write([]byte(ts + "."))
		mac.Write(body)
		matched = hmac.Equal(got, mac.Sum(nil)) || matched
	}
	if !matched {
		return "", ErrWebhookSignature
	}
	var event struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(body, &event); err != nil || event.ID == "" {
		return "", fmt.Errorf("%w: the body has no event id", ErrWebhookSignature)
	}
	return event.ID, nil
}
