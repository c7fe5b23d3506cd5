package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// A BrowserProfile is a browser profile as the API returns it (the
// reference's BrowserProfileRead): a Chromium user-data directory a
// session's browser can start from (docs/sessions-api.md, "Browser
// profiles").
type BrowserProfile struct {
	ID             string  `json:"id"`
	UserID         string  `json:"user_id"`
	OrgID          string  `json:"org_id"`
	Name           string  `json:"name"`
	Description    *string `json:"description"`
	BrowserName    string  `json:"browser_name"`
	BrowserVersion string  `json:"browser_version"`
	// S3Path is always nil on hrns: the archive is in its store.
	S3Path *string `json:"s3_path"`
	// FileSizeBytes and Checksum (SHA-256, hex) describe the archive.
	FileSizeBytes *int64            `json:"file_size_bytes"`
	Checksum      *string           `json:"checksum"`
	UsageCount    int64             `json:"usage_count"`
	LastUsedAt    *time.Time        `json:"last_used_at"`
	Labels        map[string]string `json:"labels"`
	IsDefault     bool              `json:"is_default"`
	CreatedAt     time.Time         `json:"created_at"`
	UpdatedAt     time.Time         `json:"updated_at"`
}

// A BrowserProfileList is a page of browser profiles.
type BrowserProfileList struct {
	Total    int              `json:"total"`
	Limit    int              `json:"limit"`
	Offset   int              `json:"offset"`
	Profiles []BrowserProfile `json:"profiles"`
}

// BrowserProfileCreate is what completes an upload (the reference's
// BrowserProfileCreate). BrowserName must be "chromium"; empty means it.
type BrowserProfileCreate struct {
	Name           string            `json:"name"`
	BrowserName    string            `json:"browser_name"`
	BrowserVersion string            `json:"browser_version"`
	Description    *string           `json:"description,omitempty"`
	Labels         map[string]string `json:"labels,omitempty"`
}

// A BrowserProfileUploadTarget is where an initiated upload goes (the
// reference's InitiateUploadResponse).
type BrowserProfileUploadTarget struct {
	ProfileID       string            `json:"profile_id"`
	UploadURL       string            `json:"upload_url"`
	UploadFields    map[string]string `json:"upload_fields"`
	UploadExpiresIn int               `json:"upload_expires_in"`
}

const profilesPath = "/api/v2/browser-profiles"

func profilePath(id string) string { return profilesPath + "/" + url.PathEscape(id) }

// UploadBrowserProfile uploads archive (a zip, tar or tar.gz of a
// Chromium user-data directory's contents) as a new profile of this key:
// it initiates the upload, posts the archive to the upload URL and
// completes it. A refused archive (a bomb, a path leaving the profile, a
// link, a device) is [ErrInvalid], saying why; one over the server's
// size limit is an [APIError] with StatusCode 413.
func (c *Client) UploadBrowserProfile(ctx context.Context, archive []byte, p *BrowserProfileCreate) (*BrowserProfile, error) {
	t, err := c.InitiateBrowserProfileUpload(ctx)
	if err != nil {
		return nil, err
	}
	if err := c.PostBrowserProfileArchive(ctx, t, bytes.NewReader(archive)); err != nil {
		return nil, err
	}
	return c.CompleteBrowserProfileUpload(ctx, t.ProfileID, p)
}

// InitiateBrowserProfileUpload starts an upload: a pending profile and
// where to post its archive.
func (c *Client) InitiateBrowserProfileUpload(ctx context.Context) (*BrowserProfileUploadTarget, error) {
	return send[BrowserProfileUploadTarget](ctx, c, "POST", profilesPath+"/initiate-upload", nil, false)
}

// PostBrowserProfileArchive posts the archive to the target's upload URL
// as a presigned POST takes it: a multipart form of the upload fields and
// then the archive as "file". It sends no API key (the fields carry the
// upload's token).
func (c *Client) PostBrowserProfileArchive(ctx context.Context, t *BrowserProfileUploadTarget, archive io.Reader) error {
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		for k, v := range t.UploadFields {
			if err := mw.WriteField(k, v); err != nil {
				pw.CloseWithError(err)
				return
			}
		}
		fw, err := mw.CreateFormFile("file", "profile.zip")
		if err == nil {
			_, err = io.Copy(fw, archive)
		}
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err)
	}()
	req, err := http.NewRequestWithContext(ctx, "POST", t.UploadURL, pr)
	if err != nil {
		pr.Close()
		return err
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode >= 300 {
		ae := &APIError{StatusCode: resp.StatusCode, Detail: json.RawMessage(strconv.Quote(strings.TrimSpace(string(b))))}
		var e struct{ Detail json.RawMessage }
		if json.Unmarshal(b, &e) == nil && e.Detail != nil {
			ae.Detail = e.Detail
		}
		return ae
	}
	return nil
}

// CompleteBrowserProfileUpload checks the uploaded archive and stores
// the profile with p's metadata.
func (c *Client) CompleteBrowserProfileUpload(ctx context.Context, id string, p *BrowserProfileCreate) (*BrowserProfile, error) {
	body := *p
	if body.BrowserName == "" {
		body.BrowserName = "chromium"
	}
	if body.BrowserVersion == "" {
		return nil, fmt.Errorf("hrns API: a browser profile needs its browser_version")
	}
	return send[BrowserProfile](ctx, c, "POST", profilePath(id)+"/complete-upload", &body, false)
}

// ListBrowserProfiles returns a page of this key's profiles, newest
// first: limit (1 to 1000; 0 means 10) from offset.
func (c *Client) ListBrowserProfiles(ctx context.Context, limit, offset int) (*BrowserProfileList, error) {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if offset > 0 {
		q.Set("offset", strconv.Itoa(offset))
	}
	path := profilesPath
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	return send[BrowserProfileList](ctx, c, "GET", path, nil, true)
}

// GetBrowserProfile returns the profile; another key's is [ErrNotFound].
func (c *Client) GetBrowserProfile(ctx context.Context, id string) (*BrowserProfile, error) {
	return send[BrowserProfile](ctx, c, "GET", profilePath(id), nil, true)
}

// DeleteBrowserProfile removes the profile and its archive.
func (c *Client) DeleteBrowserProfile(ctx context.Context, id string) error {
	_, _, err := c.call(ctx, "DELETE", profilePath(id), nil, nil, nil, false)
	return err
}

// DefaultBrowserProfile returns this key's default profile for the
// browser ("" means "chromium"); [ErrNotFound] when it has none.
func (c *Client) DefaultBrowserProfile(ctx context.Context, browser string) (*BrowserProfile, error) {
	if browser == "" {
		browser = "chromium"
	}
	return send[BrowserProfile](ctx, c, "GET", profilesPath+"/default?browser_name="+url.QueryEscape(browser), nil, true)
}

// SetDefaultBrowserProfile makes the profile this key's default for its
// browser (the previous default is unmarked); sessions whose web
// environment says use_default_browser_profile start from it.
func (c *Client) SetDefaultBrowserProfile(ctx context.Context, id string) (*BrowserProfile, error) {
	return send[BrowserProfile](ctx, c, "PUT", profilePath(id)+"/default", nil, true)
}

// UnsetDefaultBrowserProfile unmarks the profile as the default.
func (c *Client) UnsetDefaultBrowserProfile(ctx context.Context, id string) (*BrowserProfile, error) {
	return send[BrowserProfile](ctx, c, "DELETE", profilePath(id)+"/default", nil, true)
}

// WebWithProfile is a web environment whose browser starts from a copy of
// the browser profile; "" means the key's default profile
// (use_default_browser_profile).
func WebWithProfile(profileID string) Environment {
	f := map[string]json.RawMessage{"kind": json.RawMessage(`"web"`), "id": json.RawMessage(`"web"`)}
	if profileID == "" {
		f["use_default_browser_profile"] = json.RawMessage(`true`)
	} else {
		id, _ := json.Marshal(profileID)
		f["browser_profile_id"] = id
	}
	return Environment{Kind: "web", ID: "web", Fields: f}
}
