// Package store defines where the sessions of [hrns serve] live: the
// [Store] interface, its data types, and the rules every implementation
// follows. Package store/sqlite implements it in one embedded file, and
// package store/postgres in a PostgreSQL database that several server
// processes share (sessions are owned through leases, wake-ups go through
// [Store.Subscribe], and each process records its heartbeat: see
// [Replicas]). Both pass the same conformance suite, store/storetest.
//
// # What a store holds
//
// A [Session] is one row: its identity and owner, its status and the
// fields the API lists, and two opaque JSON documents owned by package
// session: the request as created, and the runtime state (the run's
// checkpoint, undelivered messages, pending calls and posted results). A
// session also has an append-only log of [Event]s, numbered from 0, and a
// transcript: the conversation's messages (JSON documents owned by package
// session), numbered from 0, to which each step of a run appends its new
// messages ([Transcript]), so that the cost of a step does not grow with
// the conversation.
//
// Every change goes through [Store.UpdateSession], which checks the
// version the caller read (optimistic concurrency), writes the session and
// appends events with the next indexes, in one transaction. A change is
// visible to readers, and announced to subscribers, only once committed,
// so a client never sees an event that a crash could take back.
//
// # Registries
//
// A store also keeps the agents, environments and skills that callers
// register ([Registry]): one [Entry] per owner, kind and name, with its
// definition and files as documents owned by package session, and a
// version for optimistic concurrency, like a session's.
//
// # Token usage
//
// A store also counts the tokens each owner's sessions use, per window of
// time ([Quotas]), so that a token quota holds across the replicas that
// share it.
//
// # Schedules
//
// A store also keeps the schedules callers create and a row per firing
// ([Schedules]): a tick is taken once across every process sharing the
// store, by a transaction that moves the schedule on under its version
// and inserts the run row, unique per schedule and tick.
//
// # Work and leases
//
// A session that needs a worker is Runnable, or has a WakeAt time that has
// come. [Store.Claim] hands such sessions to one worker at a time by
// setting a lease (owner and expiry); the worker renews the lease while it
// runs the session and releases it when the session waits again. A worker
// that dies leaves a lease that expires, and the session is claimed again.
// Each claim counts an attempt (Session.Attempts) until the worker makes
// progress or releases the session, so that a session whose workers keep
// dying shows it. A claim carries a token written with its leases: a
// caller whose claim answered an error after its transaction committed
// asks [Store.RecoverClaim] what it took, so that a lost answer is not
// counted as a dead worker.
//
// # Replicas
//
// A store that several server processes share may also implement
// [Replicas]: each process records a heartbeat, so that operators see
// which processes are alive and how many sessions each holds.
//
// # Conformance
//
// Package store/storetest holds the conformance suite every implementation
// passes: storetest.Run(t, newStore).
//
// [hrns serve]: https://github.com/hrns-dev/hrns/blob/main/docs/serve.md
package store

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"
)

// Errors returned by stores. Implementations return these values (or wrap
// them), so callers test with errors.Is.
var (
	// ErrNotFound: no session has the id. Returned by GetSession,
	// UpdateSession, Events, Renew and Release.
	ErrNotFound = errors.New("store: session not found")
	// ErrConflict: UpdateSession was given a session whose Version is
	// not the stored one; someone else changed it since it was read.
	// Read it again and retry.
	ErrConflict = errors.New("store: session changed since it was read")
	// ErrLeaseLost: the caller no longer holds the session's lease
	// (UpdateSession with UpdateOptions.Lease, Renew).
	ErrLeaseLost = errors.New("store: lease lost")
	// ErrTranscriptGap: an update's [Transcript] starts past the end
	// of the stored transcript.
	ErrTranscriptGap = errors.New("store: transcript change leaves a gap")
	// ErrClaimWithLease: UpdateSession was asked to claim the session
	// (UpdateOptions.Claim) in an update made under a lease or releasing
	// one.
	ErrClaimWithLease = errors.New("store: an update under a lease cannot claim")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("store: closed")
)

// A Store keeps sessions and their event logs, and the registered agents,
// environments and skills that sessions use ([Registry]).
//
// All methods are safe for concurrent use. Sessions and events returned by
// a store are the caller's to keep and modify; slices and documents given
// to a store are not retained after the call returns.
type Store interface {
	Registry
	Quotas
	Schedules
	Vaults
	Webhooks
	Profiles
	Sealed

	// CreateSession inserts s with its first events (indexed from 0)
	// and returns it as stored. Version becomes 1; CreatedAt and
	// UpdatedAt are set to now when zero. A session created Runnable
	// with LeaseOwner set is created leased to LeaseOwner until
	// LeaseUntil, with Attempts 1, as if Claim had handed it to its
	// creator (who runs it at once; [WorkTopic] is not notified);
	// otherwise LeaseOwner and LeaseUntil are ignored. Attempts is not
	// the caller's to set.
	//
	// When s.IdempotencyKey is set and the owner already has a session
	// created with that key, nothing is written: the existing session is
	// returned with created false, whatever its RequestHash (the caller
	// compares). Two concurrent creations with one key create one
	// session.
	CreateSession(ctx context.Context, s *Session, events []Event) (stored *Session, created bool, err error)

	// GetSession returns the session with the id, or ErrNotFound.
	GetSession(ctx context.Context, id string) (*Session, error)

	// EventCount returns the owner of the session with the id and the
	// number of events in its log (Session.EventCount), or ErrNotFound:
	// what a long-poll needs to know whether there is anything new,
	// without reading the session's documents.
	EventCount(ctx context.Context, id string) (owner string, count int64, err error)

	// ListSessions returns a page of the sessions matching p, newest
	// first (or oldest first with p.Ascending), and the number of
	// sessions that match in all.
	ListSessions(ctx context.Context, p *ListParams) (page []*Session, total int, err error)

	// UpdateSession writes the mutable fields of s (everything but ID,
	// Owner, IdempotencyKey, RequestHash, Request (unless
	// [UpdateOptions.WriteRequest]), GroupID, ParentID,
	// ScheduleID, CreatedAt, the lease, Attempts and EventCount) and appends events, in one transaction, if the
	// stored version is s.Version; otherwise it returns ErrConflict and
	// writes nothing.
	//
	// On success s.Version is incremented, s.EventCount and s.UpdatedAt
	// are updated, and each event gets its Index (the next ones of the
	// log, without gaps) and, when zero, its Time. Subscribers of the
	// session are notified, and subscribers of [WorkTopic] too when the
	// session is Runnable or has a WakeAt and its lease is free or expired
	// after the update: an update that claims it ([UpdateOptions.Claim])
	// or that its lease holder makes and keeps the lease
	// ([UpdateOptions.Lease] without Release) wakes no worker, since the
	// holder runs it.
	UpdateSession(ctx context.Context, s *Session, events []Event, opts *UpdateOptions) error

	// Events returns the events of the session from index from, at most
	// limit of them (all when limit <= 0), in order. It returns
	// ErrNotFound for an unknown session and no error for a range past
	// the end.
	Events(ctx context.Context, id string, from int64, limit int) ([]Event, error)

	// EventsWithin is Events bounded in bytes: it stops after the event
	// that brings the size of the events' data to maxBytes or more, so
	// a read loads at most maxBytes plus one event (the first event is
	// always returned). maxBytes <= 0 means no bound.
	EventsWithin(ctx context.Context, id string, from int64, limit int, maxBytes int64) ([]Event, error)

	// EventIndexes returns the indexes of the session's events of type
	// typ, in order, without their data. It returns ErrNotFound for an
	// unknown session.
	EventIndexes(ctx context.Context, id, typ string) ([]int64, error)

	// Messages returns the messages of the session's transcript from
	// index from, at most limit of them (all when limit <= 0), in order.
	// It returns ErrNotFound for an unknown session and no error for a
	// range past the end. Messages are written with UpdateSession
	// ([UpdateOptions.Transcript]).
	Messages(ctx context.Context, id string, from int64, limit int) ([]json.RawMessage, error)

	// Claim leases sessions that need a worker: Runnable, or with a
	// WakeAt at or before p.Now, whose lease is free or expired. Each is
	// returned with LeaseOwner p.Owner and LeaseUntil p.Now+p.TTL, in
	// creation order, at most p.Limit. Two concurrent claims never
	// return the same session.
	//
	// The claim is fair across owners (API keys): each candidate's rank
	// is the number of its owner's Runnable sessions whose lease is live
	// (running, on any worker) plus its place among its owner's
	// candidates, oldest first; the claim takes the p.Limit of lowest
	// rank, the oldest first among equals. So the sessions are taken in
	// turn across owners, the owner running fewest first, and one owner's
	// backlog does not hold back another's sessions. The sessions whose
	// WakeAt has come are first narrowed to the oldest p.Limit of all
	// owners, then ranked with their owners'.
	//
	// Claim also increments each claimed session's Attempts, in the same
	// transaction: a worker that dies while it works on the session has
	// its attempt counted. Each lease carries p.Token, the claim's
	// identity, which RecoverClaim finds it by.
	Claim(ctx context.Context, p *ClaimParams) ([]*Session, error)

	// RecoverClaim returns the sessions that the claim of p.Owner with
	// p.Token (a call of Claim, or an update with [UpdateOptions.Claim])
	// leased and that are leased under it still: no claim took them
	// since and no release or update gave the lease up. Each lease is
	// extended to p.Now+p.TTL, a lapsed one too (nothing took the
	// session since); Attempts are left as the claim counted them. A
	// caller whose Claim answered an error (its context's deadline
	// passed, or its connection broke, after the transaction committed)
	// learns so what the claim took, and runs it as if Claim had
	// returned it, instead of leaving the leases to lapse and the
	// sessions to be claimed again, another attempt counted. Calling
	// it again returns the same sessions. p.Limit and p.BelowAttempts
	// are ignored; an empty p.Token finds nothing.
	RecoverClaim(ctx context.Context, p *ClaimParams) ([]*Session, error)

	// Renew extends the caller's lease to until. It returns ErrLeaseLost
	// if owner does not hold the lease any more.
	Renew(ctx context.Context, id, owner string, until time.Time) error

	// Release gives up owner's lease on the session, and resets its
	// Attempts to 0: the worker stopped cleanly (the session waits or
	// ended, or the worker shuts down). Releasing a lease one does not
	// hold does nothing.
	Release(ctx context.Context, id, owner string) error

	// NextWake returns the earliest time after now at which Claim may
	// return a session it would not return at now: a WakeAt to come, or
	// the expiry of a lease held on a session that needs work. It returns
	// the zero time when there is none. Workers sleep until then, or until
	// notified on [WorkTopic]; a time at or before now means "claim again".
	NextWake(ctx context.Context, now time.Time) (time.Time, error)

	// Subscribe returns a channel that receives a value after each
	// committed change of the session whose id is topic, or, for
	// [WorkTopic], after each change that may give workers something to
	// claim. Call cancel to unsubscribe; it is safe to call twice.
	//
	// Delivery: the channel has a buffer of one and the store never
	// blocks on it, so notifications coalesce: a receiver learns that
	// something changed since its last receive, not what or how often.
	// Subscribe before reading the state the notification is about, and
	// read it again after each receive; no change committed after
	// Subscribe returns goes unannounced. A change is announced once
	// committed, never before; the changes of the same process at once.
	// A store shared by several processes may announce another
	// process's change late after a failure (a lost connection, a
	// process that died before it announced its commit: its package
	// says how late), and may wake subscribers for nothing.
	Subscribe(topic string) (ch <-chan struct{}, cancel func())

	// Close releases the store's resources. Pending calls may fail with
	// ErrClosed. Close is idempotent.
	Close() error
}

// WorkTopic is the [Store.Subscribe] topic of changes that may give a
// worker something to claim.
const WorkTopic = "*work*"

// Replicas is an optional capability of a [Store] shared by several server
// processes (package store/postgres implements it). Each process, a
// replica, records a heartbeat; operators list them to see which are
// alive. A replica's ID is the owner it claims sessions with
// ([ClaimParams.Owner]).
//
// The methods are safe for concurrent use; a *Replica given to Beat is not
// retained.
type Replicas interface {
	// Beat records r, replacing the record with the same ID. Records
	// not beaten for an hour are forgotten.
	Beat(ctx context.Context, r *Replica) error
	// Replicas lists the recorded replicas by ID, each with Leases set:
	// the sessions whose lease it holds at now.
	Replicas(ctx context.Context, now time.Time) ([]*Replica, error)
	// Leave removes the record of the replica with the id (a clean
	// shutdown); leaving twice does nothing.
	Leave(ctx context.Context, id string) error
}

// A Replica is the record of one server process sharing a store.
type Replica struct {
	// ID is the replica's lease owner name, unique among live replicas.
	ID string
	// Host and PID say where the process runs.
	Host string
	PID  int
	// StartedAt is when the process started; SeenAt its last heartbeat.
	StartedAt time.Time
	SeenAt    time.Time
	// ExpiresAt is when the replica counts as dead unless it beats
	// again (its lease TTL after SeenAt).
	ExpiresAt time.Time
	// Workers is how many sessions it may run at once; Running how many
	// it ran at SeenAt.
	Workers int
	Running int
	// Leases is set by [Replicas.Replicas]: the number of sessions whose
	// unexpired lease the replica holds.
	Leases int
}

// A Session is one stored session.
type Session struct {
	// ID is unique in the store.
	ID string
	// Owner is who may see the session (an API key's identity).
	Owner string
	// IdempotencyKey and RequestHash record the key the session was
	// created with, if any, and a hash of the request it came with.
	IdempotencyKey string
	RequestHash    string

	// Status is the session's lifecycle state (package session defines
	// them); the store only filters on it.
	Status string
	// Agent names the session's agent, for listings.
	Agent string
	// FirstMessage is the text of the first user message, for listings.
	FirstMessage string
	// GroupID, ParentID and ScheduleID are set at creation and never
	// change: the session's group, parent session and the schedule that
	// created it, empty for none. Listings filter on them.
	GroupID    string
	ParentID   string
	ScheduleID string
	// Request is the request the session was created with (JSON).
	Request json.RawMessage
	// State is the runtime state owned by package session (JSON).
	State json.RawMessage
	// Answer is the latest answer (JSON), nil before the first.
	Answer json.RawMessage
	// Error and ErrorCode describe a failure.
	Error     string
	ErrorCode string

	// Runnable marks a session that needs a worker now.
	Runnable bool
	// WakeAt, when not zero, is when a worker should look at the session
	// again (a deadline or timeout), even if it is not Runnable.
	WakeAt time.Time
	// LeaseOwner holds the session until LeaseUntil. Set only by Claim,
	// Renew and Release, by UpdateSession with [UpdateOptions.Claim] or
	// Release, and at creation (see [Store.CreateSession]).
	LeaseOwner string
	LeaseUntil time.Time
	// Attempts counts the claims of the session since a worker last
	// made progress or stopped cleanly: Claim increments it; Release,
	// and UpdateSession with [UpdateOptions.ResetAttempts] or Release,
	// set it to 0. A session claimed again and again without either
	// (its worker dies or fails each time) shows a growing count, which
	// package session bounds. 0 at creation.
	Attempts int

	// Version counts committed changes; see UpdateSession.
	Version int64
	// EventCount is the number of events in the session's log: the
	// index the next event gets.
	EventCount int64

	CreatedAt  time.Time
	StartedAt  time.Time // zero until the session first runs
	FinishedAt time.Time // zero until it ends
	UpdatedAt  time.Time // the last change: the latest activity
}

// An Event is one entry of a session's log.
type Event struct {
	// Index is the event's position in the log, from 0.
	Index int64
	// Type is the event type, such as "AgentEvent".
	Type string
	// Data is the event's payload (JSON).
	Data json.RawMessage
	// Time is when the event happened.
	Time time.Time
}

// ListParams select sessions for [Store.ListSessions].
type ListParams struct {
	// Owner is required: only the owner's sessions are listed.
	Owner string
	// Statuses, when set, keeps sessions in one of these states.
	Statuses []string
	// Agents, when set, keeps sessions of one of these agents.
	Agents []string
	// GroupID, ParentID and ScheduleID, when set, keep the sessions
	// that have this value.
	GroupID, ParentID, ScheduleID string
	// Search, when set, keeps sessions whose first message or answer
	// contains it, ignoring case (ASCII letters only).
	Search string
	// CreatedAfter, CreatedBefore, FinishedAfter and FinishedBefore,
	// when not zero, keep sessions created or finished strictly after
	// or before them (a session not finished has no finish time, and is
	// left out by both finish filters).
	CreatedAfter, CreatedBefore, FinishedAfter, FinishedBefore time.Time
	// Offset and Limit select the page; Limit <= 0 means 50.
	Offset, Limit int
	// Ascending lists oldest first.
	Ascending bool
}

// UpdateOptions refine [Store.UpdateSession]. A nil *UpdateOptions means
// the zero value.
type UpdateOptions struct {
	// Lease, when set, makes the update fail with ErrLeaseLost unless
	// this owner holds the session's lease: a worker that lost its lease
	// cannot write over the one that claimed the session after it.
	Lease string
	// Release gives up the lease (of Lease) in the same transaction,
	// resetting Attempts as [Store.Release] does.
	Release bool
	// ResetAttempts sets the session's Attempts to 0 in the same
	// transaction: the worker made progress.
	ResetAttempts bool
	// Transcript, when set, changes the session's transcript in the same
	// transaction (see [Transcript]).
	Transcript *Transcript
	// Claim, when set, leases the session to Claim.Owner in the same
	// transaction if the update leaves it Runnable, its lease free or
	// expired at Claim.Now, and (when Claim.BelowAttempts > 0) its
	// Attempts below Claim.BelowAttempts: as [Store.Claim] would, the
	// lease lasts until Claim.Now+Claim.TTL and Attempts is incremented.
	// On success the session given has the lease's fields as stored, so
	// LeaseOwner tells whether it was claimed. An update that claims
	// does not notify [WorkTopic]: its owner runs the session. This lets
	// the process that receives a caller's input (a tool result, a
	// message) run the session at once, without a claim of its own.
	// Claim.Limit is ignored; Claim with Lease or Release is refused
	// (ErrClaimWithLease) and nothing is written.
	Claim *ClaimParams
	// Tokens, when set, adds Tokens.N to the token count of the
	// session's owner ([Quotas.AddTokens]) in the same transaction: the
	// count moves if and only if the update is written, so an update
	// that fails (ErrConflict, ErrLeaseLost, ...) counts nothing and its
	// retry counts once. A negative N is refused with ErrNegativeTokens,
	// and nothing is written.
	Tokens *TokenCount
	// WriteRequest replaces the session's Request with s.Request in the
	// same transaction. The request is otherwise written once, at
	// creation: only the re-encryption of the secrets it holds under a
	// new key ([Sealed]) changes it.
	WriteRequest bool
	// Committed, when set, is called once the update is committed
	// (never for an update that fails), on the caller's goroutine before
	// UpdateSession returns, with the session and the events as stored:
	// what GetSession and Events would now return for the fields the
	// update wrote (Version, EventCount, UpdatedAt, the lease and
	// Attempts, each event's Index and Time, times at the store's
	// precision; s and events are also left so when UpdateSession
	// returns). A store that announces changes in process ([Subscribe])
	// calls it before it notifies the session's subscribers. It must not
	// call the store, and it must not keep s or events without copying
	// them. It lets the process that commits answer the session's
	// long-polls from what it wrote instead of reading it back.
	Committed func(s *Session, events []Event)
}

// A TokenCount is tokens to add to an owner's count in the window of
// Period that starts at Start, as [Quotas.AddTokens] adds them.
type TokenCount struct {
	Period string
	Start  time.Time
	N      int64
}

// A Transcript change replaces the messages of a session's transcript
// from index From on with Messages, numbered from From: with From the
// number of messages stored, it appends them, and only the new messages
// are written. From must be at most the number stored (no gap):
// otherwise UpdateSession fails with ErrTranscriptGap and writes nothing.
type Transcript struct {
	From     int64
	Messages []json.RawMessage
}

// ClaimParams configure [Store.Claim].
type ClaimParams struct {
	// Owner identifies the worker (a process or replica); required.
	Owner string
	// Now is the current time; TTL is how long the lease lasts.
	Now time.Time
	TTL time.Duration
	// Limit bounds the sessions claimed; <= 0 means 1.
	Limit int
	// Token identifies the claim among the owner's: Claim (and an
	// update with [UpdateOptions.Claim]) writes it with each lease it
	// takes, so that [Store.RecoverClaim] finds them when the claim's
	// answer was lost. Each claim should have a token of its own;
	// empty, the claim cannot be recovered. ClaimDeliveries and
	// ClaimScheduleRuns write it too, and a second call with the same
	// Owner and Token returns what the first took instead of claiming
	// more (see each).
	Token string
	// BelowAttempts, when > 0, leaves out sessions whose Attempts is
	// at least BelowAttempts: those claimed that often without progress
	// (a worker claims them one at a time instead).
	BelowAttempts int
	// PerKey, when > 0, bounds the deliveries of one API key
	// ([Delivery.Owner]) that ClaimDeliveries leaves leased at once,
	// counting those already leased by any worker (approximately: two
	// concurrent claims may each take the last place). Only
	// ClaimDeliveries reads it.
	PerKey int
}

// CompareCreated orders sessions by creation, then by ID: the order in
// which [Store.Claim] and [Store.RecoverClaim] return them.
func CompareCreated(a, b *Session) int {
	if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
		return c
	}
	return strings.Compare(a.ID, b.ID)
}
