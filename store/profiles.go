package store

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// ErrProfileNotFound: the owner has no browser profile with the id (or,
// for the methods that say so, none ready, or none that the upload's
// token opens). Returned by the methods of [Profiles].
var ErrProfileNotFound = errors.New("store: browser profile not found")

// Profiles keep the browser profiles that callers upload (Chromium
// user-data directories, as archives), each scoped to its owner: an
// owner never reads, lists or changes another's. It is part of every
// [Store], so that every replica finds the same profiles, archives
// included.
//
// A profile is created pending ([Profiles.CreateProfile]), receives its
// archive while pending ([Profiles.PutProfileUpload], by the token the
// creation chose), and is made ready with its metadata
// ([Profiles.CompleteProfile]). Only ready profiles are listed, made
// default or used by sessions.
//
// All methods are safe for concurrent use. Profiles returned are the
// caller's; profiles given are not retained after the call returns.
type Profiles interface {
	// CreateProfile inserts p, pending, without an archive, and returns
	// it as stored (CreatedAt and UpdatedAt set to now when zero). Its
	// ID is chosen by the caller and unique in the store; UploadToken
	// (a hash of the token that opens the upload) and UploadExpires say
	// who may upload its archive, and until when.
	CreateProfile(ctx context.Context, p *Profile) (*Profile, error)

	// GetProfile returns the owner's profile with the id, pending or
	// ready, without its archive, or ErrProfileNotFound.
	GetProfile(ctx context.Context, owner, id string) (*Profile, error)

	// ProfileArchive returns the archive of the owner's profile with the
	// id (pending or ready), or ErrProfileNotFound; nil when none was
	// uploaded yet.
	ProfileArchive(ctx context.Context, owner, id string) ([]byte, error)

	// PutProfileUpload stores archive as the upload of the pending
	// profile with the id whose UploadToken is tokenHash and whose
	// UploadExpires is after now, replacing an earlier upload; otherwise
	// it returns ErrProfileNotFound and writes nothing.
	PutProfileUpload(ctx context.Context, id string, tokenHash []byte, now time.Time, archive []byte) error

	// CompleteProfile makes the owner's pending profile p.ID ready with
	// p's Name, Description, BrowserName, BrowserVersion, Labels,
	// SizeBytes and Checksum, if its upload is archive (the archive the
	// caller checked: an upload that replaced it meanwhile is not made
	// ready); it returns the profile as stored (UpdatedAt now), or
	// ErrProfileNotFound when the owner has no such pending profile with
	// that upload.
	CompleteProfile(ctx context.Context, p *Profile, archive []byte) (*Profile, error)

	// ListProfiles returns a page of the owner's ready profiles, newest
	// first (ties by id), and how many the owner has in all.
	ListProfiles(ctx context.Context, p *ProfileListParams) (page []*Profile, total int, err error)

	// CountProfiles counts the owner's profiles, ready and pending (the
	// pending ones whose upload has not expired at now).
	CountProfiles(ctx context.Context, owner string, now time.Time) (ready, pending int, err error)

	// DeleteProfile removes the owner's profile (pending or ready) with
	// its archive, or returns ErrProfileNotFound.
	DeleteProfile(ctx context.Context, owner, id string) error

	// DeleteExpiredUploads removes the pending profiles whose upload
	// expired before the time, and returns how many.
	DeleteExpiredUploads(ctx context.Context, before time.Time) (int, error)

	// SetDefaultProfile marks the owner's ready profile with the id as
	// the owner's default for its BrowserName (on: the previous default
	// of that browser is unmarked in the same transaction) or unmarks it
	// (off), and returns it as stored; ErrProfileNotFound when the owner
	// has no such ready profile.
	SetDefaultProfile(ctx context.Context, owner, id string, on bool) (*Profile, error)

	// DefaultProfile returns the owner's default ready profile for the
	// browser, or ErrProfileNotFound.
	DefaultProfile(ctx context.Context, owner, browserName string) (*Profile, error)

	// UseProfile counts one use of the owner's ready profile: UsageCount
	// incremented, LastUsedAt set to at. ErrProfileNotFound when there is
	// no such ready profile.
	UseProfile(ctx context.Context, owner, id string, at time.Time) error

	// SaveProfileArchive replaces the archive of the owner's ready
	// profile with the id (a session's browser written back, with
	// persist_browser_profile), with its SizeBytes (len(archive)) and
	// Checksum, and UpdatedAt set to at, in one write: a reader sees the
	// old archive or the new one, never a mix. Of concurrent writes the
	// last to commit wins whole. ErrProfileNotFound, writing nothing,
	// when the owner has no such ready profile (deleted meanwhile).
	SaveProfileArchive(ctx context.Context, owner, id string, archive []byte, checksum string, at time.Time) (*Profile, error)
}

// A Profile is one stored browser profile.
type Profile struct {
	// ID is unique in the store (a UUID).
	ID string
	// Owner is who may see and use the profile (an API key's identity).
	Owner string
	// Ready is false until CompleteProfile.
	Ready bool
	// UploadToken is a hash of the token that opens the upload of a
	// pending profile; UploadExpires ends it.
	UploadToken   []byte
	UploadExpires time.Time

	Name           string
	Description    *string
	BrowserName    string
	BrowserVersion string
	// Labels is a JSON object of strings, or nil.
	Labels json.RawMessage
	// SizeBytes and Checksum (SHA-256, hex) describe the archive.
	SizeBytes int64
	Checksum  string
	IsDefault bool

	UsageCount int64
	LastUsedAt *time.Time
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// ProfileListParams select profiles for [Profiles.ListProfiles].
type ProfileListParams struct {
	// Owner is required: only the owner's profiles are listed.
	Owner string
	// Offset and Limit select the page; Limit <= 0 means 10.
	Offset, Limit int
}
