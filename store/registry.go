package store

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// The kinds of registry entries: what [Entry.Kind] holds.
const (
	KindAgent       = "agent"
	KindEnvironment = "environment"
	KindSkill       = "skill"
)

// Errors of a [Registry]. ErrConflict is returned too (see UpdateEntry).
var (
	// ErrEntryNotFound: the owner has no entry of the kind with the name.
	// Returned by GetEntry, UpdateEntry and DeleteEntry.
	ErrEntryNotFound = errors.New("store: registry entry not found")
	// ErrEntryExists: CreateEntry was given a kind, owner and name that
	// already have an entry.
	ErrEntryExists = errors.New("store: registry entry already exists")
)

// A Registry keeps the named agents, environments and skills that callers
// register, each scoped to its owner: an owner never reads, lists or
// changes another's entries. It is part of every [Store], so that the
// entries live beside the sessions that use them and every replica sees
// the same ones.
//
// All methods are safe for concurrent use. Entries returned are the
// caller's; entries given are not retained after the call returns.
type Registry interface {
	// CreateEntry inserts e and returns it as stored: Version 1,
	// CreatedAt and UpdatedAt set to now when zero. It returns
	// ErrEntryExists, and writes nothing, when the owner already has an
	// entry of the kind with the name; of two concurrent creations of one
	// name, one succeeds.
	CreateEntry(ctx context.Context, e *Entry) (*Entry, error)

	// GetEntry returns the entry, with its Files, or ErrEntryNotFound.
	GetEntry(ctx context.Context, kind, owner, name string) (*Entry, error)

	// ListEntries returns a page of the entries matching p, in p.Sort's
	// order, and the number that match in all. Entries of a list have no
	// Files.
	ListEntries(ctx context.Context, p *EntryListParams) (page []*Entry, total int, err error)

	// UpdateEntry replaces the Type, Description, Spec and Files of the
	// entry named by e's Kind, Owner and Name, if its stored version is
	// e.Version; otherwise it returns ErrConflict and writes nothing
	// (ErrEntryNotFound when there is no such entry). It returns the
	// entry as stored: Version incremented, CreatedAt kept, UpdatedAt
	// set to now.
	UpdateEntry(ctx context.Context, e *Entry) (*Entry, error)

	// DeleteEntry removes the entry, or returns ErrEntryNotFound.
	DeleteEntry(ctx context.Context, kind, owner, name string) error
}

// An Entry is one registered agent, environment or skill.
type Entry struct {
	// Kind is KindAgent, KindEnvironment or KindSkill.
	Kind string
	// Owner is who may see and change the entry (an API key's identity).
	Owner string
	// Name identifies the entry among the owner's entries of its kind:
	// an agent's or skill's name, an environment's id.
	Name string
	// Type refines the kind, for filtering: an environment's kind ("web",
	// "desktop"); empty for the others.
	Type string
	// Description is what searches match besides the name.
	Description string
	// Spec is the entry's definition (JSON), owned by the caller.
	Spec json.RawMessage
	// Files are the files stored with the entry (JSON, owned by the
	// caller; a skill's), nil when none. Lists leave them out.
	Files json.RawMessage

	// Version counts committed changes; see UpdateEntry.
	Version   int64
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Sort orders of [EntryListParams].
const (
	SortCreatedDesc = "-created_at" // newest first: the default
	SortCreatedAsc  = "created_at"
	SortNameAsc     = "name"
	SortNameDesc    = "-name"
)

// EntryListParams select entries for [Registry.ListEntries].
type EntryListParams struct {
	// Kind and Owner are required: only the owner's entries of the kind
	// are listed.
	Kind, Owner string
	// Type, when set, keeps the entries of that Type.
	Type string
	// Name, when set, keeps the entries whose name contains it, ignoring
	// ASCII case.
	Name string
	// Search, when set, keeps the entries whose name or description
	// contains it, ignoring ASCII case.
	Search string
	// Sort is one of the Sort constants; empty means SortCreatedDesc.
	// Ties are broken by name.
	Sort string
	// Offset and Limit select the page; Limit <= 0 means 50.
	Offset, Limit int
}
