package session

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/pricing"
	"github.com/hrns-dev/hrns/store"
)

// Options configure a [Manager]. The zero value of each field means the
// documented default.
type Options struct {
	// Agents are the named agents callers may use.
	Agents map[string]*AgentConfig
	// Catalog maps more names of agents (such as "h/web-surfer-flash")
	// to names of Agents: a request naming one gets that agent.
	Catalog map[string]string
	// Environments are the toolsets a caller may give an inline agent,
	// by environment kind (for example "web"). A kind not listed is
	// refused.
	Environments map[string]*loop.Toolset
	// SessionEnvironments give each session an environment of its own,
	// by kind (for example "web": a browser per session); see
	// [EnvironmentFunc]. A kind here is offered like one of
	// Environments, and takes precedence over it.
	SessionEnvironments map[string]EnvironmentFunc
	// MCPServers, when set, connects the sessions whose environments
	// name MCP servers (mcp_servers) to them, each run to its own; nil
	// refuses such requests (422).
	MCPServers *MCPServerOptions
	// Toolsets are further toolsets only named agents may use (for
	// example files or shell): a caller cannot grant them to itself.
	Toolsets map[string]*loop.Toolset
	// DefaultModel is the model of agents that name none.
	DefaultModel string
	// MaxSteps is the step budget of sessions that set none; 0 means 100.
	MaxSteps int
	// Workers bounds the sessions run at once by this process; 0 means
	// 64. Sessions beyond it wait, pending or running, for a worker.
	Workers int
	// LeaseTTL is how long a worker's claim on a session lasts without
	// renewal; 0 means 15 seconds. A worker renews it every third of it.
	// When several processes share the store, it is also how long the
	// sessions of a process that died wait before another takes them
	// over, and a process that has not recorded its heartbeat for that
	// long counts as unhealthy.
	LeaseTTL time.Duration
	// ReplicaID names this process in the leases it takes and in the
	// list of replicas; it must be unique among the processes sharing
	// the store. Empty means the host name followed by a random suffix.
	ReplicaID string
	// TimeoutGrace is how long the final answer asked for at max_time_s
	// may take before the run is cut; 0 means 30 seconds.
	TimeoutGrace time.Duration
	// AutoApprove runs calls of tools that require approval without
	// asking. By default they wait for a decision through the API.
	// Hooks and deny rules still refuse calls.
	AutoApprove bool
	// Permissions and Hooks are the permission policy and the hooks of
	// the runs of every session whose agent has none of its own (see
	// AgentConfig): inline agents, and named ones without. Nil and empty
	// mean tools that require approval wait for a decision, and the
	// others run. See [loop.Permissions] and [loop.Hook]; hooks find the
	// session's ID with [IDFromContext].
	Permissions *loop.Permissions
	Hooks       []loop.Hook
	// ToolTimeout bounds each server-side tool call; 0 means the loop's
	// default (5 minutes).
	ToolTimeout time.Duration
	// Retry configures retries of failed model requests; the zero value
	// means the loop's defaults.
	Retry loop.RetryPolicy
	// MaxAttempts bounds how many times in a row workers may start
	// running a session without committing a step of its run (a model
	// answer, a tool result) or stopping cleanly, before the session is
	// failed (error_code internal) instead of run again: each time, the
	// process running it died (a crash, kill -9) or the store failed.
	// 0 means 3. A panic or an internal error while running a session
	// fails it at once.
	MaxAttempts int
	// Skills are the skills callers may name in an inline agent's
	// skills, by name; inline skills need none.
	Skills map[string]*Skill
	// MaxActiveSessions bounds the sessions an owner (an API key) has
	// active at once: pending, running, paused, idle or awaiting tool
	// results. A session created beyond it waits as queued (or is
	// refused with [ErrQuotaExceeded] when its request sets queue:
	// false), and queued sessions start, oldest first, as the owner's
	// active ones finish. 0 means no limit. With several replicas the
	// bound is approximate: two creations on two replicas at once may
	// both be admitted.
	MaxActiveSessions int
	// MaxUnreadBytes bounds what a session holds of input its agent has
	// not read yet (see [ErrSessionFull]); 0 means [MaxUnreadBytes].
	MaxUnreadBytes int
	// MaxReadBytes bounds the bytes of events one read loads (a page of
	// events, one answer of /changes); 0 means [MaxReadBytes].
	MaxReadBytes int
	// MaxReadsPerOwner bounds the event reads of one owner loading at
	// once (see [ErrReadBusy]); 0 means [MaxReadsPerOwner].
	MaxReadsPerOwner int
	// MaxReads bounds the event reads loading at once, all owners
	// together; 0 means [MaxReads]. A freed slot goes to the waiting
	// owner with the fewest reads loading.
	MaxReads int
	// MaxReadQueue bounds the event reads of one owner waiting for a
	// slot: one more fails at once with [ErrReadBusy]; 0 means
	// [MaxReadQueue], a negative value none (no read waits).
	MaxReadQueue int
	// MaxReadQueueTotal bounds the event reads waiting for a slot, all
	// owners together: one more fails at once with [ErrReadQueueFull],
	// and, past three quarters of it, one of an owner that has its share
	// waiting with [ErrReadBusy] (see [MaxReadQueueTotal]); 0 means
	// [MaxReadQueueTotal], a negative value none (no read waits).
	MaxReadQueueTotal int
	// MaxReadWait is how long a read waits for a slot before it fails
	// with [ErrReadBusy]; 0 means [MaxReadWait], a negative value not at
	// all.
	MaxReadWait time.Duration
	// Prices price the sessions' usage in their metrics (the costs of
	// GET /changes and of MetricsUpdateEvent); nil means
	// [pricing.Default]. A model that is not in the table has null
	// costs.
	Prices pricing.Table
	// ContextWindows are the context windows of the models, in tokens
	// (see [pricing.Windows]); nil means [pricing.DefaultWindows].
	ContextWindows pricing.Windows
	// Compaction tunes the automatic compaction of the sessions'
	// transcripts, on unless DisableCompaction is set: before a request
	// would pass Threshold of the window of the session's model
	// (ContextWindows; a model in none is compacted only when its
	// provider refuses a request as too long), and after such a refusal,
	// before the request is sent again. Its ContextWindow, when 0, is
	// the window from ContextWindows. Nil means the loop's defaults (see
	// [loop.Compaction]). Each compaction is logged as a
	// ContextCompactedEvent, and the compacted transcript is what the
	// session's next checkpoint holds, so a session runs on compacted
	// after a restart.
	Compaction *loop.Compaction
	// DisableCompaction turns automatic compaction off: a session whose
	// transcript outgrows the window fails with the provider's error.
	DisableCompaction bool
	// TokenQuota, when set, limits the tokens each owner's sessions use
	// per window (see [QuotaPolicy]; package platform/quota's *Tokens,
	// per day or month); tokens are counted per month either way.
	TokenQuota QuotaPolicy
	// Vaults, when set, gives sessions whose agent's environments name a
	// vault (vault_id) that vault's tools: the one_time_code tool. See
	// [VaultToolsFunc]. Nil means a request naming a vault is refused.
	Vaults VaultToolsFunc
	// Workspaces is the directory that holds the sessions' workspaces,
	// one directory each, named by [Manager.WorkspaceName]: the files
	// attached to user messages are saved there, under files/ (the
	// server's session files operations serve the same directory).
	// Empty means none: a message with files is refused.
	Workspaces string
	// PublicURL is the server's address as its clients reach it (the
	// server's Options.PublicURL, hrns serve --public-url): the url of
	// each AttachmentEvent, and of each file the stored request shows,
	// is made from it. Empty means the url is a path from the server's
	// root ("/api/v2/sessions/ID/resources/files/files/NAME"), since the
	// runtime cannot know the address a client used.
	PublicURL string
	// FileFetchAllow, when set, opens addresses beyond the public
	// internet to the fetching of URL files of user messages (see
	// package internal/netpolicy); nil means only public addresses.
	FileFetchAllow func(netip.AddrPort) bool
	// Logger receives the manager's logs; nil discards them.
	Logger *slog.Logger
	// Observer, when non-nil, watches the sessions' runs (see
	// [loop.Observer]; package github.com/hrns-dev/hrns/otel traces
	// them). A session that waits keeps the trace context of its run
	// with its calls, so that the replica that resumes it continues the
	// same trace.
	Observer loop.Observer
}

// A Manager runs sessions stored in a [store.Store]: it creates them,
// applies callers' input to them, and runs them with its workers.
//
// Every method that changes a session commits the change and the events
// that report it in one store transaction before it returns, so what a
// caller is told is durable. A session that waits (for tool results, an
// approval, a message or its resume) holds no goroutine: any Manager on
// the same store picks it up when it can run again.
type Manager struct {
	// fixed at creation
	st    store.Store
	model llm.Model
	opts  Options
	owner string // this process's lease owner id
	log   *slog.Logger

	started time.Time
	// beforeRun, set by tests only, is called where a worker starts
	// running a session.
	beforeRun func(id string)
	// beforeWatch, set by tests only, is called where a worker's watch
	// of its session starts, in the watch's goroutine.
	beforeWatch func(id string)
	// dropDelivery, set by tests only, loses the delivery of children's
	// ends to their parents, as a crash at that moment would.
	dropDelivery bool
	// afterChild, set by tests only, is called when a run has created a
	// child session.
	afterChild func(parent string)
	// childCheck is how often a parent waiting for a child session checks
	// it (a fallback for a delivery lost to a crash): childCheckEvery,
	// or shorter in tests.
	childCheck time.Duration

	reads readSlots // the event reads loading, per owner

	admit sync.Mutex // serialises admission (counting and creating) with MaxActiveSessions

	mu                       sync.Mutex
	creating                 map[string]bool // owner + idempotency key being created
	cancel                   context.CancelCauseFunc
	done                     chan struct{}
	running                  map[string]int    // workers running each session here (two, briefly, after a release)
	holding                  map[string]int    // of those, the workers that have not given the lease up (one at most: see startWorker)
	claimedAgain             map[string]string // claimed again while a worker here held the lease, with its owner: run once it gives it up (leaseLeft)
	ownerWorkers             map[string]int    // per owner (API key), the workers running its sessions here and the claims of its inputs in flight (admitClaim); no zero entries
	backlog                  bool              // sessions may wait for a worker that the dispatcher has not claimed (see admitClaim)
	backlogSet               uint64            // counts the times backlog was set, so that a claim clears only what it saw
	reserved                 int               // workers reserved for claims by callers' input (reserveClaim)
	workCtx                  context.Context
	wg                       sync.WaitGroup // the workers and the heartbeat
	stopping                 bool           // set once the dispatcher waits for wg: no worker starts
	crashSuspect             string         // the session claimed often without progress running here, if any
	freed                    chan struct{}
	idleWorkers              chan func() // to a worker's goroutine waiting for a session to run
	workerIdle               time.Duration
	workerGoroutines         int  // the worker goroutines started (m.mu held)
	dispatcherWaitsForWorker bool // the dispatcher waits for a worker to free up (see slotFreed)
	// mcpFailed holds, per session id, the MCP servers its run's mount
	// left out, until the run reports them (mcpservers.go).
	mcpFailed sync.Map
	// mcpHealth counts the MCP definitions whose values do not decrypt
	// (mcpsecrets.go), for the operator's GET /healthz.
	mcpHealth mcpSecretsHealth
	// transcripts keeps the transcripts of the sessions run last decoded.
	transcripts *transcriptCache
	// committed keeps the sessions as this process last committed them.
	committed *sessionCache
	kept      *keptStates // the states of the last commits of runs, kept decoded
	// lastCommits keeps the last commits of sessions with their events, for
	// the long-polls they wake (see Changes).
	lastCommits *recentCommits
	// commitsInFlight counts the commits in flight by session, for the
	// long-polls their notifications wake before they are recorded.
	commitsInFlight inflightCommits
	// longPolls counts, by session, the long-polls of this process
	// waiting, which a commit lets answer before it goes on (see commit).
	longPolls waiters
	// flightWaited, set by tests only, is called when a woken long-poll
	// waits for a commit in flight.
	flightWaited func(id string)
	lastBeat     time.Time // the last heartbeat recorded in the store
}

// New returns a manager of the sessions in st that runs them with model.
// A nil opts means the defaults. Call [Manager.Start] to run sessions.
func New(st store.Store, model llm.Model, opts *Options) *Manager {
	if st == nil || model == nil {
		panic("session.New: nil store or model")
	}
	m := &Manager{st: st, model: model, transcripts: newTranscriptCache(transcriptCacheBytes), committed: newSessionCache(sessionCacheBytes), kept: newKeptStates(keptStatesBytes), lastCommits: newRecentCommits(recentCommitsBytes), creating: map[string]bool{}, running: map[string]int{}, holding: map[string]int{}, claimedAgain: map[string]string{}, ownerWorkers: map[string]int{}, freed: make(chan struct{}, 1), idleWorkers: make(chan func()), workerIdle: workerIdle}
	if opts != nil {
		m.opts = *opts
	}
	o := &m.opts
	o.Agents = maps.Clone(o.Agents)
	o.Catalog = maps.Clone(o.Catalog)
	o.Environments = maps.Clone(o.Environments)
	o.SessionEnvironments = maps.Clone(o.SessionEnvironments)
	o.Toolsets = maps.Clone(o.Toolsets)
	o.Skills = maps.Clone(o.Skills)
	o.Prices = maps.Clone(o.Prices)
	o.ContextWindows = maps.Clone(o.ContextWindows)
	if o.Compaction != nil {
		c := *o.Compaction
		o.Compaction = &c
	}
	if o.MaxSteps <= 0 {
		o.MaxSteps = 100
	}
	if o.Workers <= 0 {
		o.Workers = 64
	}
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = 15 * time.Second
	}
	if o.TimeoutGrace <= 0 {
		o.TimeoutGrace = 30 * time.Second
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 3
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	m.log = o.Logger
	m.owner = o.ReplicaID
	if m.owner == "" {
		m.owner = defaultReplicaID()
	}
	m.started = time.Now().UTC()
	m.childCheck = childCheckEvery
	return m
}

// CreateParams are the arguments of [Manager.Create].
type CreateParams struct {
	// Owner is who may see the session.
	Owner string
	// Request is the decoded request; Raw is its body as received,
	// compared for idempotency. The session keeps and shows the request
	// normalised (see [Manager.Create]).
	Request *Request
	Raw     json.RawMessage
	// IdempotencyKey, when set, makes a retry of the same request return
	// the session the first one created.
	IdempotencyKey string
	// ScheduleID names the schedule that creates the session (package
	// platform/schedule), for the list filter schedule_id; empty for none.
	ScheduleID string
}

// Create validates a request and stores a new pending session; a worker
// starts it. It returns the session and whether it was created now (false
// when the idempotency key returned the session of an earlier request).
//
// Errors: a *[ValidationError] for an invalid request,
// [ErrIdempotencyMismatch] when the key came with another request, and
// [ErrInFlight] while another request with the key is being created.
func (m *Manager) Create(ctx context.Context, p *CreateParams) (*View, bool, error) {
	return m.create(ctx, p, false)
}

// mayExist reports whether the session id may have been created by a
// creation that answered createErr (nil: it answered that another
// session, an Idempotency-Key's, was there, so id was not made). A write
// may commit and its answer be lost, so after an error the store is
// asked, within createCheckBound (the caller's context may have ended:
// its cut is what made the answer lost): only a session it says is not
// there lets its workspace, and the files the caller gave, be removed;
// in doubt they stay (a directory no session names is harmless, a
// session without the files its first message names is not).
func (m *Manager) mayExist(ctx context.Context, id string, createErr error) bool {
	if createErr == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), createCheckBound)
	defer cancel()
	_, err := m.st.GetSession(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return false
	}
	if err != nil {
		m.log.Warn("a creation answered an error and whether it stored its session is unknown; its files stay", "session", id, "err", err, "create_err", createErr)
	}
	return true
}

// createCheckBound bounds mayExist's read of the store.
const createCheckBound = 5 * time.Second

// create is Create; a child session (of a subagent) is not subject to
// admission control, lest it wait for the slot its parent holds.
func (m *Manager) create(ctx context.Context, p *CreateParams, child bool) (*View, bool, error) {
	hash := requestHash(p.Raw)
	if p.IdempotencyKey != "" {
		k := p.Owner + "\x00" + p.IdempotencyKey
		m.mu.Lock()
		busy := m.creating[k]
		m.creating[k] = true
		m.mu.Unlock()
		if busy {
			return nil, false, ErrInFlight
		}
		defer func() {
			m.mu.Lock()
			delete(m.creating, k)
			m.mu.Unlock()
		}()
	}
	// The request is normalised to what is stored and echoed (the names
	// the caller gave kept); the registry turns the names into the
	// definitions the session runs.
	echo := m.normalize(p.Request)
	req, reg, err := m.forSession(ctx, p.Owner, echo)
	if err != nil {
		return nil, false, err
	}
	sp, msgs, err := m.resolve(ctx, p.Owner, req)
	if err != nil {
		return nil, false, err
	}
	reg.apply(sp)
	if err := m.bindVaults(ctx, p.Owner, sp); err != nil {
		return nil, false, err
	}
	if err := m.bindProfiles(ctx, p.Owner, sp); err != nil {
		return nil, false, err
	}
	if err := m.checkSecrets(p.Owner, sp); err != nil {
		return nil, false, err
	}
	files, err := m.prepareFiles(ctx, req.Messages, "body", "messages")
	if err != nil {
		return nil, false, err
	}
	id := newID()
	// The files are saved before the session is: a message never names
	// a file that is not there. The stored request shows each as the
	// URL that downloads it, not its bytes.
	attachments := make([][]store.Event, len(msgs))
	var known []map[string]fileMark
	for i := range files {
		if len(files[i]) == 0 {
			continue
		}
		parts, evs, shown, marks, err := m.saveFiles(id, workspaceOf(sp, id), files[i])
		if err != nil {
			return nil, false, err
		}
		known = append(known, marks)
		msgs[i].Parts = append(msgs[i].Parts, parts...)
		attachments[i] = evs
		echo.Messages[i].Files = shown
	}
	normalized, err := json.Marshal(echo)
	if err != nil {
		return nil, false, err
	}
	// The secrets of MCP servers are stored sealed (mcpsecrets.go).
	if normalized, err = m.sealSession(p.Owner, id, sp, normalized); err != nil {
		return nil, false, err
	}
	st := &state{Spec: agentSpec{spec: sp}, Phase: phaseNew}
	for _, marks := range known {
		knowFiles(st, marks)
	}
	if sp.System != "" {
		st.Checkpoint.Messages = encodeTranscript([]llm.Message{llm.SystemMessage(sp.System)})
	}
	var events []store.Event
	for i, msg := range msgs {
		st.NextInID++
		st.Inbox = append(st.Inbox, inboxMessage{ID: st.NextInID, Message: msg})
		events = append(events, messageEvent(msg, req.Messages[i].CallerID))
		events = append(events, attachments[i]...)
	}
	first := ""
	if len(req.Messages) > 0 {
		first = req.Messages[0].Message
	}
	s := &store.Session{
		ID:             id,
		Owner:          p.Owner,
		IdempotencyKey: p.IdempotencyKey,
		RequestHash:    hash,
		Agent:          sp.Agent,
		FirstMessage:   first,
		GroupID:        deref(req.GroupID),
		ParentID:       deref(req.ParentSessionID),
		ScheduleID:     p.ScheduleID,
		Request:        normalized,
		CreatedAt:      time.Now().UTC(),
	}
	derive(s, st)
	if s.State, err = json.Marshal(st); err != nil {
		return nil, false, err
	}
	if !child {
		if err := m.checkTokens(ctx, p.Owner); err != nil {
			return nil, false, err
		}
	}
	if m.opts.MaxActiveSessions > 0 && !child {
		m.admit.Lock()
		defer m.admit.Unlock()
		active, err := m.active(ctx, p.Owner)
		if err != nil {
			return nil, false, err
		}
		if active >= m.opts.MaxActiveSessions {
			if req.Queue != nil && !*req.Queue {
				return nil, false, ErrQuotaExceeded
			}
			st.toQueued()
			derive(s, st)
			if s.State, err = json.Marshal(st); err != nil {
				return nil, false, err
			}
		}
	}
	// A session that can start now is created claimed by this process,
	// which runs it at once (see reserveClaim).
	h := &leaseChange{}
	claim := m.reserveClaim()
	claiming := claim != nil && s.Runnable && m.admitClaim(p.Owner, h)
	if claiming {
		s.LeaseOwner, s.LeaseUntil = claim.Claim.Owner, claim.Claim.Now.Add(claim.Claim.TTL)
	}
	got, created, err := m.st.CreateSession(ctx, s, events)
	if (err != nil || !created) && files != nil && !m.mayExist(ctx, id, err) {
		// The files were saved for a session that was not made (a
		// failed write, or an Idempotency-Key's session already there):
		// its workspace, new and named for it alone, goes.
		os.RemoveAll(filepath.Join(m.opts.Workspaces, workspaceOf(sp, id)))
	}
	h.claimed = err == nil && created && claim != nil && got.LeaseOwner == claim.Claim.Owner
	if err != nil && claiming {
		h.lost, h.created = err, id // it may have committed (see runClaimed)
	}
	m.runClaimed(claim, got, nil, h)
	if err != nil {
		return nil, false, err
	}
	if !created && got.RequestHash != hash {
		return nil, false, ErrIdempotencyMismatch
	}
	v, err := view(got)
	if v != nil {
		v.NotHonoured = m.notHonoured(req)
	}
	return v, created, err
}

// activeStatuses are the states that count towards MaxActiveSessions.
var activeStatuses = []string{string(StatusPending), string(StatusRunning), string(StatusPaused), string(StatusIdle), string(StatusAwaitingToolResults)}

// active counts the owner's active sessions.
func (m *Manager) active(ctx context.Context, owner string) (int, error) {
	_, n, err := m.st.ListSessions(ctx, &store.ListParams{Owner: owner, Statuses: activeStatuses, Limit: 1})
	return n, err
}

// unlimited is the limit a quota shows when there is none.
const unlimited = 1<<31 - 1

// Quota returns the owner's concurrent-session quota.
func (m *Manager) Quota(ctx context.Context, owner string) (*Quota, error) {
	active, err := m.active(ctx, owner)
	if err != nil {
		return nil, err
	}
	limit := m.opts.MaxActiveSessions
	if limit <= 0 {
		limit = unlimited
	}
	return &Quota{Scope: "user", Limit: limit, Active: active, Available: max(limit-active, 0)}, nil
}

// requestHash hashes the canonical form of a JSON body, so that the same
// request written with other spacing or key order matches.
func requestHash(raw json.RawMessage) string {
	var v any
	b := []byte(raw)
	if json.Unmarshal(raw, &v) == nil {
		b, _ = json.Marshal(v)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Get returns the session.
func (m *Manager) Get(ctx context.Context, owner, id string) (*View, error) {
	s, err := m.get(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	return view(s)
}

// Status returns the session's live status.
func (m *Manager) Status(ctx context.Context, owner, id string) (*StatusView, error) {
	v, err := m.Get(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	return &v.Status, nil
}

func (m *Manager) get(ctx context.Context, owner, id string) (*store.Session, error) {
	s, err := m.st.GetSession(ctx, id)
	if errors.Is(err, store.ErrNotFound) || err == nil && s.Owner != owner {
		return nil, ErrNotFound
	}
	return s, err
}

// ListParams select sessions for [Manager.List].
type ListParams struct {
	Statuses []Status
	// Agents keeps the sessions of these agents (by name).
	Agents []string
	// GroupID, ParentSessionID and ScheduleID keep the sessions
	// created with them.
	GroupID, ParentSessionID, ScheduleID string
	// Search keeps sessions whose first message or answer contains it,
	// ignoring case.
	Search string
	// CreatedAfter, CreatedBefore, FinishedAfter and FinishedBefore
	// bound the creation and finish times (exclusive); zero means no
	// bound.
	CreatedAfter, CreatedBefore, FinishedAfter, FinishedBefore time.Time
	// Page counts from 1; Size is at most 100.
	Page, Size int
	Ascending  bool
}

// List returns a page of the owner's sessions, newest first.
func (m *Manager) List(ctx context.Context, owner string, p *ListParams) (*Page[Summary], error) {
	lp := &store.ListParams{Owner: owner, Offset: (p.Page - 1) * p.Size, Limit: p.Size, Ascending: p.Ascending,
		Agents: p.Agents, GroupID: p.GroupID, ParentID: p.ParentSessionID, ScheduleID: p.ScheduleID, Search: p.Search,
		CreatedAfter: p.CreatedAfter, CreatedBefore: p.CreatedBefore, FinishedAfter: p.FinishedAfter, FinishedBefore: p.FinishedBefore}
	for _, s := range p.Statuses {
		lp.Statuses = append(lp.Statuses, string(s))
	}
	ss, total, err := m.st.ListSessions(ctx, lp)
	if err != nil {
		return nil, err
	}
	page := &Page[Summary]{Items: []Summary{}, Total: total, Page: p.Page}
	for _, s := range ss {
		sum := Summary{ID: s.ID, Status: Status(s.Status), CreatedAt: s.CreatedAt, StartedAt: timePtr(s.StartedAt), FinishedAt: timePtr(s.FinishedAt), LastActivityAt: timePtr(s.UpdatedAt)}
		if s.Agent != "" {
			sum.Agent = &s.Agent
		}
		if s.FirstMessage != "" {
			sum.FirstMessage = &UserMessage{Type: "user_message", Message: s.FirstMessage, CallerID: "user"}
		}
		page.Items = append(page.Items, sum)
	}
	return page, nil
}

// ChangesParams are the arguments of [Manager.Changes].
type ChangesParams struct {
	// From is the cursor: the number of events already seen.
	From int64
	// Limit, when set, bounds the events returned (0: none, only the
	// status fields); nil means all.
	Limit *int
	// NoEvents leaves the events out (the status fields still come).
	NoEvents bool
	// Wait is how long to wait for an event when there is none yet.
	Wait time.Duration
}

// Changes returns the session's events from p.From, waiting up to p.Wait
// for one if there are none yet. It returns a nil *Changes when nothing
// came by then (also for a cursor past the end of the log, as the
// reference does), and the session's event count (the next cursor) either
// way. An event wakes a waiting call at once: it is announced by the
// store when committed. When this process made the session's last commit
// and the cursor falls within that commit's events, the call is answered
// from what the commit wrote (see recentCommits), without a read.
func (m *Manager) Changes(ctx context.Context, owner, id string, p *ChangesParams) (*Changes, int64, error) {
	notify, unsubscribe := m.st.Subscribe(id)
	defer unsubscribe()
	var timeout <-chan time.Time
	if p.Wait > 0 {
		t := time.NewTimer(p.Wait)
		defer t.Stop()
		timeout = t.C
		m.longPolls.add(id)
		defer m.longPolls.done(id)
	}
	var count int64
	for woken := false; ; woken = true {
		if c, count, ok := m.lastCommits.changes(owner, id, p); ok {
			return m.withinBudget(c), count, nil
		}
		if done := m.flightOf(woken, id); done != nil {
			// Woken by a commit of this process not yet recorded: wait
			// for it to be (see commitsInFlight), rather than read it back.
			// One that outlasts the wait does not keep what woke the
			// long-poll from being answered: it is read, below.
			select {
			case <-done:
			case <-timeout:
				timeout = nil
			case <-ctx.Done():
				return nil, count, ctx.Err()
			}
			if c, count, ok := m.lastCommits.changes(owner, id, p); ok {
				return m.withinBudget(c), count, nil
			}
		}
		if !woken {
			// The count first: most long-polls find nothing new and
			// wait, and it reads none of the session's documents.
			sOwner, n, err := m.st.EventCount(ctx, id)
			if errors.Is(err, store.ErrNotFound) || err == nil && sOwner != owner {
				return nil, 0, ErrNotFound
			}
			if err != nil {
				return nil, 0, err
			}
			count = n
			if count > max(p.From, 0) && timeout != nil {
				// Events already there, maybe of a commit of this
				// process still in flight: its transaction is seen before
				// it is recorded. Wait for it, as a woken long-poll does.
				// One that outlasts the wait does not keep what is there
				// from being answered: it is read, below.
				if done := m.flightOf(true, id); done != nil {
					select {
					case <-done:
						if c, count, ok := m.lastCommits.changes(owner, id, p); ok {
							return m.withinBudget(c), count, nil
						}
					case <-timeout:
						timeout = nil
					case <-ctx.Done():
						return nil, count, ctx.Err()
					}
				}
			}
		}
		if woken || count > max(p.From, 0) {
			// Woken by a change this manager did not record (another
			// process's, or one announced before it was recorded), or
			// with events already there: read them.
			s, err := m.get(ctx, owner, id)
			if err != nil {
				return nil, 0, err
			}
			if count = s.EventCount; count > max(p.From, 0) {
				return m.changes(ctx, s, p)
			}
		}
		if timeout == nil {
			return nil, count, nil
		}
		select {
		case <-notify:
		case <-timeout:
			return nil, count, nil
		case <-ctx.Done():
			return nil, count, ctx.Err()
		}
	}
}

// flightOf returns, for a woken long-poll, the end of the commits of id
// in flight here (nil: none, or not woken).
func (m *Manager) flightOf(woken bool, id string) <-chan struct{} {
	if !woken {
		return nil
	}
	done := m.commitsInFlight.wait(id)
	if done != nil && m.flightWaited != nil {
		m.flightWaited(id)
	}
	return done
}

// statusChanges is a Changes with the status fields of s and its metrics,
// and no events yet.
func statusChanges(s *store.Session, met Metrics) *Changes {
	return &Changes{
		Status:     Status(s.Status),
		StartedAt:  timePtr(s.StartedAt),
		FinishedAt: timePtr(s.FinishedAt),
		Error:      strPtr(s.Error),
		ErrorCode:  strPtr(s.ErrorCode),
		NewEvents:  []Event{},
		Answer:     s.Answer,
		Metrics:    met,
	}
}

func (m *Manager) changes(ctx context.Context, s *store.Session, p *ChangesParams) (*Changes, int64, error) {
	c := statusChanges(s, m.metrics(usageState(s)))
	if !p.NoEvents {
		// Only the events the session had when read: the status fields
		// then describe the session as of the last event returned.
		from := max(p.From, 0)
		limit := int(s.EventCount - from)
		if p.Limit != nil {
			limit = min(limit, *p.Limit)
		}
		if limit > 0 {
			// At most the read budget (plus one event): the caller's
			// cursor moves by the events returned.
			events, err := m.eventsWithin(ctx, s.Owner, s.ID, from, limit)
			if err != nil {
				return nil, 0, err
			}
			c.NewEvents = apiEvents(events)
		}
	}
	return c, s.EventCount, nil
}

// EventsParams select a page of events for [Manager.Events].
type EventsParams struct {
	// Page counts from 1.
	Page, Size int
	// From, when set, starts the page at this event index instead of at
	// Page (the newest event listed, when Descending): the cursor a page
	// that stopped early gives ([Page.NextIndex]).
	From *int64
	// Descending lists newest first.
	Descending bool
	// Type keeps events of this type only.
	Type string
}

// Events returns a page of the session's event history. A page loads at
// most Options.MaxReadBytes of events (plus one event): one that stops
// early sets [Page.NextIndex] ([Manager.EventPage] gives a page whole,
// in pieces of that size). It fails with [ErrReadBusy] when the owner
// has Options.MaxReadsPerOwner reads loading.
func (m *Manager) Events(ctx context.Context, owner, id string, p *EventsParams) (*Page[Event], error) {
	return m.events(ctx, owner, owner, id, p)
}

// events is Events, its reads counted for reader.
func (m *Manager) events(ctx context.Context, reader, owner, id string, p *EventsParams) (*Page[Event], error) {
	r, err := m.eventPage(ctx, reader, owner, id, p)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	page := &Page[Event]{Items: []Event{}, Page: r.Page, Total: r.Total}
	events, err := m.eventsAt(ctx, id, r.want)
	if err != nil {
		return nil, err
	}
	page.Items = apiEvents(events)
	if len(events) < len(r.want) {
		page.NextIndex = &r.want[len(events)]
	}
	return page, nil
}

// An EventPageReader gives a page of a session's events whole, in
// pieces: each [EventPageReader.Next] loads at most Options.MaxReadBytes
// of events (plus one event), so that a page of any size is given
// entire while the process holds one piece of it at a time. Each piece
// is loaded holding one of the owner's reads (Options.MaxReadsPerOwner,
// Options.MaxReads), given back before Next returns: a caller that
// takes long to send a piece (to a client that reads slowly, or not at
// all) holds no read meanwhile, and delays nobody's.
type EventPageReader struct {
	// Total is the number of matching events; Page the page's number.
	Total, Page int

	m       *Manager
	ctx     context.Context
	reader  string // whose reads the pieces take
	id      string
	want    []int64 // the page's indexes, in its order
	release func()  // the read held, from EventPage to the first piece's end
}

// EventPage opens the page p of the session's events for reading in
// pieces ([EventPageReader]); it fails as [Manager.Events] does,
// before anything is read. p.From is honoured as Events honours it; the
// page is then the one Events would start there, whole.
func (m *Manager) EventPage(ctx context.Context, owner, id string, p *EventsParams) (*EventPageReader, error) {
	return m.eventPage(ctx, owner, owner, id, p)
}

// Next returns the page's next events, at least one, in the page's
// order; none, and no error, once the page was given whole. The first
// piece is read with the read [Manager.EventPage] took; each other waits
// for one as any read does, and fails as [Manager.Events] does
// ([ErrReadBusy], [ErrReadQueueFull]); the page goes on from there at
// the next call.
func (r *EventPageReader) Next() ([]Event, error) {
	if len(r.want) == 0 {
		r.Close()
		return nil, nil
	}
	if r.release == nil {
		release, err := r.m.acquireRead(r.ctx, r.reader)
		if err != nil {
			return nil, err
		}
		r.release = release
	}
	events, err := r.m.eventsAt(r.ctx, r.id, r.want)
	r.Close() // before the caller sends the piece
	if err != nil {
		return nil, err
	}
	if len(events) == 0 {
		// The log is shorter than its count said: nothing more to give.
		r.want = nil
		return nil, nil
	}
	r.want = r.want[len(events):]
	return apiEvents(events), nil
}

// Close gives back the read held, if any (until the first piece is
// read). It may be called more than once.
func (r *EventPageReader) Close() {
	if r.release != nil {
		r.release()
		r.release = nil
	}
}

// eventPage resolves page p of the session's events to their indexes,
// holding one of reader's reads, which the first piece is read with.
func (m *Manager) eventPage(ctx context.Context, reader, owner, id string, p *EventsParams) (*EventPageReader, error) {
	s, err := m.get(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	release, err := m.acquireRead(ctx, reader)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			release()
		}
	}()
	r := &EventPageReader{Page: p.Page, m: m, ctx: ctx, reader: reader, id: id}
	// idx: the indexes of the events that match, ascending; nil with no
	// type: every index below total.
	var idx []int64
	total := s.EventCount
	if p.Type != "" {
		if idx, err = m.st.EventIndexes(ctx, id, p.Type); err != nil {
			return nil, err
		}
		total = int64(len(idx))
	}
	at := func(i int64) int64 { // the index of the i-th match
		if p.Type == "" {
			return i
		}
		return idx[i]
	}
	r.Total = int(total)
	// The page: positions [lo, hi) among the matches, in the page's order.
	lo := int64((p.Page - 1) * p.Size)
	if p.Descending {
		lo = total - int64(p.Page*p.Size)
	}
	if p.From != nil {
		// The first match at or after From (the last at or before it,
		// descending).
		pos := sortSearch(total, func(i int64) bool { return at(i) >= *p.From })
		lo = pos
		if p.Descending {
			if pos < total && at(pos) == *p.From {
				pos++
			}
			lo = pos - int64(p.Size)
		}
	}
	hi := lo + int64(p.Size)
	lo, hi = max(lo, 0), min(hi, total)
	if lo < hi {
		r.want = make([]int64, 0, hi-lo)
		for i := lo; i < hi; i++ {
			r.want = append(r.want, at(i))
		}
		if p.Descending {
			slices.Reverse(r.want)
		}
	}
	ok = true
	r.release = release
	return r, nil
}

// sortSearch is [sort.Search] over int64.
func sortSearch(n int64, f func(int64) bool) int64 {
	lo, hi := int64(0), n
	for lo < hi {
		mid := lo + (hi-lo)/2
		if !f(mid) {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

func apiEvents(events []store.Event) []Event {
	out := make([]Event, len(events))
	for i, e := range events {
		out[i] = Event{Index: e.Index, Type: e.Type, Data: e.Data, Timestamp: e.Time}
	}
	return out
}

func view(s *store.Session) (*View, error) {
	st := viewState(s)
	v := &View{
		ID:           s.ID,
		Request:      redactMCP(s.Request),
		LatestAnswer: s.Answer,
		CreatedAt:    s.CreatedAt,
		StartedAt:    timePtr(s.StartedAt),
		FinishedAt:   timePtr(s.FinishedAt),
		Status: StatusView{
			Status:             Status(s.Status),
			Error:              strPtr(s.Error),
			ErrorCode:          strPtr(s.ErrorCode),
			Steps:              st.Steps,
			UsagePerModel:      st.usage(),
			SubagentSessionIDs: append([]string{}, st.Children...),
		},
	}
	if v.Request == nil {
		v.Request = json.RawMessage("{}")
	}
	if s.LeaseOwner != "" {
		v.Lease = &Lease{Replica: s.LeaseOwner, Until: s.LeaseUntil}
	}
	return v, nil
}

// input is update for a caller's input: it starts from the session as
// this process last committed it (see sessionCache), and when the change
// makes the session runnable, its commit claims the session for this
// process, which runs it at once (see reserveClaim).
// It returns the events the input appended.
func (m *Manager) input(ctx context.Context, id string, fn func(s *store.Session, st *state) ([]store.Event, error)) (EventRange, error) {
	opts := m.reserveClaim()
	h := &leaseChange{}
	var s *store.Session
	var st *state
	defer func() {
		// even after a panic: the reservation ends. A state the commit
		// claimed nothing for is kept (keepUnclaimed), and no longer
		// this input's to touch.
		if !h.claimed {
			st = nil
		}
		m.runClaimed(opts, s, handOver(s, st), h)
	}()
	var n int // the events of the last call of fn: those committed
	c := &change{cur: m.committed.get(id), opts: opts, lease: h, keepUnclaimed: true}
	s, st, err := m.commit(ctx, id, c, func(s *store.Session, st *state) ([]store.Event, error) {
		events, err := fn(s, st)
		n = len(events)
		return events, err
	})
	if err != nil {
		return EventRange{}, err
	}
	return EventRange{From: s.EventCount - int64(n), To: s.EventCount}, nil
}

// An EventRange is the events a caller's input appended to the session's
// log: the indexes from From to To-1, none when From == To (the input
// changed nothing, as a result posted again does).
type EventRange struct {
	From, To int64
}

// mutate is input that must be the owner's, to a session not finished.
func (m *Manager) mutate(ctx context.Context, owner, id string, fn func(s *store.Session, st *state) ([]store.Event, error)) (EventRange, error) {
	r, err := m.input(ctx, id, func(s *store.Session, st *state) ([]store.Event, error) {
		if s.Owner != owner {
			return nil, ErrNotFound
		}
		if st.Phase == phaseDone {
			return nil, fmt.Errorf("%w: it is %s", ErrFinished, s.Status)
		}
		return fn(s, st)
	})
	if errors.Is(err, store.ErrNotFound) {
		return EventRange{}, ErrNotFound
	}
	return r, err
}

// PostToolResults records results of pending client-side calls. A result
// for a call that already has one is ignored, so posting twice is
// harmless. When no call waits any more, the session runs again.
//
// Errors: [ErrNotFound], [ErrFinished] once the session has ended, and a
// *[ValidationError] for a result whose call the session does not have
// or that waits for approval instead; then nothing is recorded.
func (m *Manager) PostToolResults(ctx context.Context, owner, id string, results []ToolResult) error {
	_, err := m.PostToolResultsRange(ctx, owner, id, results)
	return err
}

// PostToolResultsRange is [Manager.PostToolResults] that also returns the
// events the results appended to the session's log: a caller that saw
// the log up to From (nothing else came in between) can go on from To
// without reading its own results back.
func (m *Manager) PostToolResultsRange(ctx context.Context, owner, id string, results []ToolResult) (EventRange, error) {
	return m.mutate(ctx, owner, id, func(s *store.Session, st *state) ([]store.Event, error) {
		var events []store.Event
		var v validation
		changed := false
		for i, r := range results {
			if r.Kind == KindError && r.ToolReq.ID == "" {
				// An error not tied to a call: logged, and read by the
				// agent as a message before its next step.
				if err := m.checkUnread(st, len(r.Error)); err != nil {
					return nil, err
				}
				events = append(events, callerError(st, r))
				changed = true
				continue
			}
			idx := slices.IndexFunc(st.Checkpoint.Calls, func(c callState) bool { return c.Call.ID == r.ToolReq.ID })
			if idx < 0 {
				answered, err := m.answeredBefore(ctx, s.ID, &st.Checkpoint, r.ToolReq.ID)
				if err != nil {
					return nil, err
				}
				if answered {
					continue // a retry of a result the run has used
				}
				v.add(fmt.Sprintf("the session has no pending tool call %q", r.ToolReq.ID), "body", "results", i, "tool_req", "id")
				continue
			}
			c := &st.Checkpoint.Calls[idx]
			if c.Result != nil {
				continue
			}
			if !c.Client {
				v.add(fmt.Sprintf("tool call %q is a call of the server's tool %q: approve or reject it with POST /api/v2/sessions/{id}/approvals", c.Call.ID, c.Call.Name), "body", "results", i, "tool_req", "id")
				continue
			}
			res := &llm.ToolResult{CallID: c.Call.ID, Name: c.Call.Name}
			req := toolRequest(c.Call)
			if r.Kind == KindError {
				res.IsError = true
				res.Content = []llm.Part{llm.TextPart(r.Error)}
				events = append(events, agentEvent(AgentEventData{Kind: KindError, Error: r.Error, Origin: r.Origin, ToolReq: &req}))
			} else {
				content, logged, obs, msg := postedContent(r.Result, &req)
				if msg != "" {
					v.add(msg, "body", "results", i, "result", "image")
					continue
				}
				res.Content = content
				events = append(events, agentEvent(AgentEventData{Kind: KindToolResult, ToolReq: &req, Result: logged}))
				for _, o := range obs {
					events = append(events, agentEvent(o))
				}
			}
			c.Result, c.Waiting = res, ""
			changed = true
		}
		if err := v.err(); err != nil {
			return nil, err
		}
		if !changed {
			return nil, errNoChange
		}
		if st.Phase == phaseIdle {
			events = append(events, st.toRun()...)
		}
		return append(events, st.settle()...), nil
	})
}

// callerError records an error_event the caller posted without tool_req:
// it is logged as posted, and the agent reads it as a user message.
func callerError(st *state, r ToolResult) store.Event {
	text := fmt.Sprintf("Error reported by %s: %s", firstNonEmpty(r.Origin, "the caller"), r.Error)
	st.NextInID++
	st.Inbox = append(st.Inbox, inboxMessage{ID: st.NextInID, Message: llm.Message{Role: llm.RoleUser, Parts: []llm.Part{llm.TextPart(text)}}})
	return agentEvent(AgentEventData{Kind: KindError, Error: r.Error, Origin: r.Origin})
}

// answeredBefore reports whether the checkpoint's transcript holds a
// result for the call with the id. Only the messages that quote the id
// are decoded.
func (m *Manager) answeredBefore(ctx context.Context, id string, cp *checkpoint, callID string) (bool, error) {
	encoded := []json.RawMessage{json.RawMessage(cp.Messages)}
	if len(cp.Messages) == 0 && cp.Length > 0 {
		var err error
		if encoded, err = m.st.Messages(ctx, id, 0, int(cp.Length)); err != nil {
			return false, &storeError{err}
		}
	}
	quoted := []byte(strconv.Quote(callID))
	for _, raw := range encoded {
		if !bytes.Contains(raw, quoted) {
			continue
		}
		var msgs []llm.Message
		if len(cp.Messages) > 0 {
			msgs, _ = cp.Messages.decode()
		} else {
			var msg llm.Message
			if json.Unmarshal(raw, &msg) == nil {
				msgs = []llm.Message{msg}
			}
		}
		for _, msg := range msgs {
			for _, p := range msg.Parts {
				if p.Kind == llm.PartToolResult && p.ToolResult != nil && p.ToolResult.CallID == callID {
					return true, nil
				}
			}
		}
	}
	return false, nil
}

// resultText is what the model reads for a posted result: a string as it
// is, other JSON as JSON.
func resultText(r json.RawMessage) string {
	var s string
	if json.Unmarshal(r, &s) == nil {
		return s
	}
	if len(r) == 0 || string(r) == "null" {
		return ""
	}
	return string(r)
}

func orNull(r json.RawMessage) json.RawMessage {
	if len(r) == 0 {
		return json.RawMessage("null")
	}
	return r
}

// Decide approves or rejects calls that wait for approval. When no call
// waits any more, the session runs again: approved calls run, rejected
// ones are reported to the model with the reason.
//
// Errors: as [Manager.PostToolResults].
func (m *Manager) Decide(ctx context.Context, owner, id string, decisions []Decision) error {
	_, err := m.mutate(ctx, owner, id, func(s *store.Session, st *state) ([]store.Event, error) {
		var events []store.Event
		var v validation
		changed := false
		for i, d := range decisions {
			idx := slices.IndexFunc(st.Checkpoint.Calls, func(c callState) bool { return c.Call.ID == d.ID })
			if idx < 0 || st.Checkpoint.Calls[idx].Waiting != waitApproval && st.Checkpoint.Calls[idx].Decision == nil {
				if idx >= 0 && st.Checkpoint.Calls[idx].Result != nil {
					continue
				}
				answered, err := m.answeredBefore(ctx, s.ID, &st.Checkpoint, d.ID)
				if err != nil {
					return nil, err
				}
				if answered {
					continue
				}
				v.add(fmt.Sprintf("no tool call %q waits for approval", d.ID), "body", "decisions", i, "id")
				continue
			}
			c := &st.Checkpoint.Calls[idx]
			if c.Decision != nil || c.Result != nil {
				continue
			}
			c.Decision = &loop.ApprovalDecision{CallID: d.ID, Approved: d.Approved, Reason: d.Reason}
			req := toolRequest(c.Call)
			flow := "reject"
			if d.Approved {
				flow = "approve"
			}
			events = append(events, agentEvent(AgentEventData{Kind: KindFlow, Flow: flow, Origin: "user", ToolReq: &req}))
			changed = true
		}
		if err := v.err(); err != nil {
			return nil, err
		}
		if !changed {
			return nil, errNoChange
		}
		return append(events, st.settle()...), nil
	})
	return err
}

// SendMessages gives the agent user messages: a running agent reads them
// before its next step, an idle one wakes up, a waiting one reads them
// with the tool results it waits for. As in the reference, a paused
// session resumes, and a finished one starts again with the messages
// (see restart).
func (m *Manager) SendMessages(ctx context.Context, owner, id string, msgs []UserMessage) error {
	converted, verr := userMessages(msgs, "body", "messages")
	if verr != nil {
		return verr
	}
	if len(converted) == 0 {
		return invalid("no message", "body", "messages")
	}
	if err := m.checkTokens(ctx, owner); err != nil {
		return err
	}
	callers := make([]string, len(msgs))
	for i := range msgs {
		callers[i] = normalizeMessage(msgs[i]).CallerID
	}
	files, err := m.prepareFiles(ctx, msgs, "body", "messages")
	if err != nil {
		return err
	}
	var attachments [][]store.Event
	var known []map[string]fileMark
	if files != nil {
		// Saved before the message is taken, into the session's
		// workspace (another key's session is not found).
		s, err := m.get(ctx, owner, id)
		if err != nil {
			return err
		}
		sst, err := stateOf(s)
		if err != nil {
			return err
		}
		attachments = make([][]store.Event, len(msgs))
		for i := range files {
			if len(files[i]) == 0 {
				continue
			}
			parts, evs, _, marks, err := m.saveFiles(s.ID, workspaceOf(sst.Spec.spec, s.ID), files[i])
			if err != nil {
				return err
			}
			known = append(known, marks)
			converted[i].Parts = append(converted[i].Parts, parts...)
			attachments[i] = evs
		}
	}
	_, err = m.input(ctx, id, func(s *store.Session, st *state) ([]store.Event, error) {
		if s.Owner != owner {
			return nil, ErrNotFound
		}
		if st.Phase == phaseDone && st.Spec.spec == nil {
			return nil, fmt.Errorf("%w: it is %s and its state is lost", ErrFinished, s.Status)
		}
		adding := 0
		for i := range converted {
			adding += messageBytes(&converted[i])
		}
		if err := m.checkUnread(st, adding); err != nil {
			return nil, err
		}
		for _, marks := range known {
			knowFiles(st, marks)
		}
		events := receive(s, st, converted, callers, time.Now())
		if attachments == nil {
			return events, nil
		}
		// Each message's attachments after its message_event.
		var out []store.Event
		n := 0
		for _, e := range events {
			out = append(out, e)
			if e.Type == EventAgent && n < len(attachments) && isMessageEvent(e) {
				out = append(out, attachments[n]...)
				n++
			}
		}
		return out, nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return ErrNotFound
	}
	return err
}

// Pause pauses the session: a running agent stops before its next step,
// and a waiting session does not run again until it is resumed. Pausing a
// paused session does nothing.
func (m *Manager) Pause(ctx context.Context, owner, id string) error {
	_, err := m.mutate(ctx, owner, id, func(s *store.Session, st *state) ([]store.Event, error) {
		if st.Paused || st.PauseRequested {
			return nil, errNoChange
		}
		return pause(st), nil
	})
	return err
}

// Resume undoes [Manager.Pause].
func (m *Manager) Resume(ctx context.Context, owner, id string) error {
	_, err := m.mutate(ctx, owner, id, func(s *store.Session, st *state) ([]store.Event, error) {
		if !st.Paused && !st.PauseRequested {
			return nil, errNoChange
		}
		return unpause(st), nil
	})
	return err
}

// ForceAnswer asks the agent for its final answer at its next step, without
// tools. Calls it waits for are answered with an error saying so. An idle
// session, which has answered, is left as it is.
func (m *Manager) ForceAnswer(ctx context.Context, owner, id string) error {
	_, err := m.mutate(ctx, owner, id, func(s *store.Session, st *state) ([]store.Event, error) {
		if st.Final != finalNone || st.Phase == phaseIdle {
			return nil, errNoChange
		}
		return forceAnswer(st), nil
	})
	return err
}

// Cancel ends the session as interrupted, stopping a running agent at
// once. Cancelling an ended session does nothing.
func (m *Manager) Cancel(ctx context.Context, owner, id string) error {
	_, _, err := m.update(ctx, id, nil, func(s *store.Session, st *state) ([]store.Event, error) {
		if s.Owner != owner {
			return nil, ErrNotFound
		}
		if st.Phase == phaseDone {
			return nil, errNoChange
		}
		return finish(s, st, outcomeInterrupted), nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return ErrNotFound
	}
	return err
}

func newID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// isMessageEvent reports whether e is an AgentEvent of a message.
func isMessageEvent(e store.Event) bool {
	var d struct {
		Kind string `json:"kind"`
	}
	return json.Unmarshal(e.Data, &d) == nil && d.Kind == KindMessage
}
