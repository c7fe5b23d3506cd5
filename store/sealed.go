package store

import "context"

// Sealed finds, across every owner, the documents that hold values
// sealed under a key other than the primary one: the MCP servers' env and
// headers values that package session stores encrypted (a session's
// Request and State, a registry entry's Spec, a schedule's Spec). The
// operator's re-encryption under a new key pages through them, so that
// the old key can be dropped.
//
// A store knows nothing of the values' format: a document matches when it
// holds [SealedParams.Prefix] anywhere but where Prefix is followed by
// KeyID and ":" (what the primary key sealed). A match may therefore be
// a document whose other text holds Prefix (the caller checks); a
// document with a value under another key is never left out.
//
// Each method reads its table once across its pages: a page continues in
// the order of the table's key from where the last one stopped, so that
// a re-encryption's reads, like its memory, are bounded by its page.
// All methods are safe for concurrent use.
type Sealed interface {
	// SessionsSealed returns the ids of at most p.Limit sessions, of any
	// owner, whose Request or State matches, ordered by id, after
	// p.After.
	SessionsSealed(ctx context.Context, p *SealedParams) ([]string, error)
	// EntriesSealed returns at most p.Limit registry entries, of any
	// owner and kind, with their Files, whose Spec matches, ordered by
	// kind, owner and name, after p.AfterEntry.
	EntriesSealed(ctx context.Context, p *SealedParams) ([]*Entry, error)
	// SchedulesSealed returns at most p.Limit schedules, of any owner,
	// whose Spec matches, ordered by id, after p.After.
	SchedulesSealed(ctx context.Context, p *SealedParams) ([]*Schedule, error)
}

// SealedParams select what the methods of [Sealed] return.
type SealedParams struct {
	// Prefix starts every sealed value; KeyID is the primary key's id.
	// Both are required.
	Prefix, KeyID string
	// After, for sessions and schedules, starts the page past this id
	// (empty: from the first).
	After string
	// AfterEntry, for entries, starts the page past the entry of this
	// Kind, Owner and Name (nil: from the first).
	AfterEntry *Entry
	// Limit bounds the page; <= 0 means 100.
	Limit int
}

// Under is what Prefix starts where KeyID sealed the value.
func (p *SealedParams) Under() string { return p.Prefix + p.KeyID + ":" }

// PageLimit is Limit with its default.
func (p *SealedParams) PageLimit() int {
	if p.Limit <= 0 {
		return 100
	}
	return p.Limit
}
