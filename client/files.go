package client

import (
	"context"
	"encoding/base64"
	"github.com/hrns-dev/hrns/api"
	"time"
)

// TokenQuotaStatus is the key's token quota and its use in the current
// window; Limit and Remaining are nil when the server sets no limit.
type TokenQuotaStatus = api.TokenQuotaStatus

// TokenQuota returns the key's token quota (GET /api/v2/quota/tokens).
// Once it is spent, creating a session or sending a message fails with an
// *APIError that matches [ErrTokenQuotaExceeded], whose RetryAfter is the
// wait until the next window.
func (c *Client) TokenQuota(ctx context.Context) (*TokenQuotaStatus, error) {
	var q TokenQuotaStatus
	_, _, err := c.call(ctx, "GET", "/api/v2/quota/tokens", nil, nil, &q, true)
	return &q, err
}

// A FileEntry is one entry of a directory of a session's workspace.
type FileEntry struct {
	Name       string    `json:"name"`
	Path       string    `json:"path"`
	SizeBytes  int64     `json:"size_bytes"`
	ModifiedAt time.Time `json:"modified_at"`
	IsDir      bool      `json:"is_dir"`
}

// A FileList is one page of a directory of a session's workspace, newest
// first; Truncated says there is more (see [ListFilesOptions.After]).
type FileList struct {
	Path      string      `json:"path"`
	Files     []FileEntry `json:"files"`
	Truncated bool        `json:"truncated"`
}

// ListFilesOptions select what [Handle.ListFiles] lists; the zero value
// lists the workspace itself, up to 500 entries.
type ListFilesOptions struct {
	// Path is the directory, relative to the workspace ("~/" is the
	// workspace too).
	Path string
	// MaxEntries bounds the page; 0 means 500 (the server caps it at
	// 1000).
	MaxEntries int
	// After, when set, is the last entry of the previous page: the page
	// starts after it.
	After *FileEntry
}

// ListFiles lists a directory of the session's workspace, newest first.
func (h *Handle) ListFiles(ctx context.Context, opts *ListFilesOptions) (*FileList, error) {
	body := map[string]any{}
	if opts != nil {
		if opts.Path != "" {
			body["path"] = opts.Path
		}
		if opts.MaxEntries > 0 {
			body["max_entries"] = opts.MaxEntries
		}
		if opts.After != nil {
			body["modified_before"], body["name_after"] = opts.After.ModifiedAt, opts.After.Name
		}
	}
	var l FileList
	_, _, err := h.c.call(ctx, "POST", "/api/v2/sessions/"+h.id+"/files/list_files", nil, body, &l, true)
	return &l, err
}

// ReadFile returns the content of a file of the session's workspace (at
// most 10 MiB) and when it last changed. A missing file is an *APIError
// that matches [ErrNotFound]; a path that leaves the workspace, or names
// no regular file, one that matches [ErrInvalid].
func (h *Handle) ReadFile(ctx context.Context, path string) ([]byte, time.Time, error) {
	var r struct {
		ContentBase64 string    `json:"content_base64"`
		ModifiedAt    time.Time `json:"modified_at"`
	}
	if _, _, err := h.c.call(ctx, "POST", "/api/v2/sessions/"+h.id+"/files/read_file", nil, map[string]string{"path": path}, &r, true); err != nil {
		return nil, time.Time{}, err
	}
	b, err := base64.StdEncoding.DecodeString(r.ContentBase64)
	return b, r.ModifiedAt, err
}

// WriteFile creates a file of the session's workspace, or replaces its
// content, with data; missing directories are made. The request body,
// data in base64, is bounded by the server's body limit (5 MB unless its
// operator says otherwise).
func (h *Handle) WriteFile(ctx context.Context, path string, data []byte) error {
	body := map[string]string{"path": path, "content_base64": base64.StdEncoding.EncodeToString(data)}
	_, _, err := h.c.call(ctx, "POST", "/api/v2/sessions/"+h.id+"/files/write_file", nil, body, nil, true)
	return err
}
