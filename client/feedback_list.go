package client

import (
	"context"
	"fmt"
	"github.com/hrns-dev/hrns/api"
	"net/url"
	"strings"
)

// FeedbackList is the feedback given on a session and its events.
type FeedbackList = api.FeedbackList

// ListFeedback returns the feedback the key gave on the session and its
// events ([Handle.Feedback], [Handle.EventFeedback]).
func (h *Handle) ListFeedback(ctx context.Context) (*FeedbackList, error) {
	var l FeedbackList
	_, _, err := h.c.call(ctx, "GET", "/api/v2/sessions/"+h.id+"/feedback", nil, nil, &l, true)
	return &l, err
}

// SharedEvents returns a page (from 1, of size events, oldest first) of
// the events of the session a share URL names ([Handle.Share]), as anyone
// with the URL may read them: the request carries no key, and goes to
// this client's server (the URL's token is what is used, from the absolute
// URL the server gives or its path alone). A revoked URL is an *APIError
// that matches [ErrNotFound]. A page asked by number is whole, however
// large its events (the server sends it in pieces).
func (c *Client) SharedEvents(ctx context.Context, shareURL string, page, size int) (*api.Page[Event], error) {
	return c.sharedEvents(ctx, shareURL, fmt.Sprintf("page=%d&size=%d", page, size))
}

// SharedEventsFrom is [Client.SharedEvents] for the page of at most size
// events that starts at event index from. Such a page stops early at the
// server's bound on what one read loads (4 MiB of events, plus one): it
// then has NextIndex set, where the next page starts.
func (c *Client) SharedEventsFrom(ctx context.Context, shareURL string, from int64, size int) (*api.Page[Event], error) {
	return c.sharedEvents(ctx, shareURL, fmt.Sprintf("from_index=%d&size=%d", from, size))
}

func (c *Client) sharedEvents(ctx context.Context, shareURL, query string) (*api.Page[Event], error) {
	path := shareURL
	if u, err := url.Parse(shareURL); err == nil && u.IsAbs() {
		path = u.EscapedPath()
	}
	const marker = "/api/v2/shared/"
	i := strings.LastIndex(path, marker)
	token := ""
	if i >= 0 {
		token, _ = url.PathUnescape(path[i+len(marker):])
	}
	if token == "" || strings.Contains(token, "/") {
		return nil, fmt.Errorf("hrns API: %q is not a share URL (.../api/v2/shared/TOKEN)", shareURL)
	}
	anon := *c
	anon.key = ""
	var p api.Page[Event]
	_, _, err := anon.call(ctx, "GET", "/api/v2/shared/"+url.PathEscape(token)+"/events?"+query, nil, nil, &p, true)
	return &p, err
}
