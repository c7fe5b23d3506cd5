package session

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strconv"
)

// ErrResourceNotFound: the session has no resource at the bucket and key.
var ErrResourceNotFound = errors.New("resource not found")

// ResourceBucketEvents is the bucket of the images a session's events
// carry (the browser's screenshots in observation_event); a resource's
// key is the index of its event.
const ResourceBucketEvents = "events"

// maxResourceBytes bounds what a resource may decode to: an event image is
// far smaller (the browser caps screenshots at 1 MiB).
const maxResourceBytes = 16 << 20

// Resource returns a resource of the session id of owner: the bytes and
// media type of the image of the event at index key in bucket "events".
// It returns ErrNotFound for a session owner cannot see, and
// ErrResourceNotFound for a bucket or key that names no image.
func (m *Manager) Resource(ctx context.Context, owner, id, bucket, key string) ([]byte, string, error) {
	s, err := m.get(ctx, owner, id)
	if err != nil {
		return nil, "", err
	}
	if bucket != ResourceBucketEvents {
		return nil, "", ErrResourceNotFound
	}
	i, err := strconv.ParseInt(key, 10, 64)
	if err != nil || i < 0 || i >= s.EventCount || strconv.FormatInt(i, 10) != key {
		return nil, "", ErrResourceNotFound
	}
	events, err := m.st.Events(ctx, id, i, 1)
	if err != nil {
		return nil, "", err
	}
	if len(events) != 1 {
		return nil, "", ErrResourceNotFound
	}
	var d AgentEventData
	if json.Unmarshal(apiEvents(events)[0].Data, &d) != nil || d.Image == nil || d.Image.Type != "base64" ||
		base64.StdEncoding.DecodedLen(len(d.Image.Source)) > maxResourceBytes {
		return nil, "", ErrResourceNotFound
	}
	b, err := base64.StdEncoding.DecodeString(d.Image.Source)
	if err != nil {
		return nil, "", ErrResourceNotFound
	}
	// The media type is a tool's word: only image types are served as
	// such, anything else as opaque bytes.
	mt := "application/octet-stream"
	switch d.Image.MediaType {
	case "image/png", "image/jpeg", "image/gif", "image/webp":
		mt = d.Image.MediaType
	}
	return b, mt, nil
}
