// Package session is the durable runtime behind hrns serve: it keeps
// sessions (an agent, its conversation and an append-only event log) in a
// [store.Store], applies callers' input to them, and runs them with the
// agent loop of package loop.
//
//	m := session.New(st, model, &session.Options{Environments: map[string]*loop.Toolset{"web": tools.Web(nil)}})
//	if err := m.Start(ctx); err != nil { ... }
//	defer m.Stop(context.Background())
//	v, _, err := m.Create(ctx, &session.CreateParams{Owner: "alice", Request: req, Raw: body})
//
// # Environments
//
// An inline agent names environments ("web"); [Options.Environments] are
// toolsets all sessions share, [Options.SessionEnvironments] give each
// session an environment of its own (hrns serve's web environment: a
// browser per session), opened each time the session runs and closed when
// the run stops: a waiting session holds no browser either. See
// [EnvironmentFunc].
//
// # States
//
// A session is created pending (or queued, above its owner's
// [Options.MaxActiveSessions], until a slot frees), runs (running), and
// may then wait: awaiting_tool_results while calls of client-side tools
// (declared by the caller, run by the caller), calls needing approval or
// child sessions of subagents are unanswered, idle after an answer when
// idle_timeout_s keeps it open for another message (or before its first
// message), paused when its caller paused it. It ends completed, failed,
// timed_out (max_time_s) or interrupted (cancelled); a message starts a
// finished session again. [Status] names them.
//
// # Requests
//
// A request is normalised (Manager.normalize) to the reference's
// SessionRequest before it is validated: what the body left to defaults
// is filled in, and the session keeps and shows the normalised request.
// That function is the place for resolving names and ids of agents and
// environments a registry keeps; skills named by the server are resolved
// by resolveSkill.
//
// # Durability
//
// Every change of a session is committed to the store together with the
// events that report it, before anyone is told: a long-poll sees an
// event only once it is on disk. The run commits a checkpoint at each
// step: after the model answers (the calls it made, before they run; a
// step whose calls all wait for the caller with the wait that follows)
// and after each call finishes. The transcript is stored as rows, each
// step appending only its new messages ([store.Transcript]); the state
// says how many of them the checkpoint continues from. A crash loses only the
// step in progress: the model request in flight is sent again, and server
// tools whose results were not committed run again (at least once). A
// waiting session holds no goroutine; its checkpoint is in the store and
// a worker of any [Manager] on that store continues it when it can run
// again. Workers own the sessions they run through leases, which they
// renew, so a dead worker's sessions are claimed again once its leases
// expire.
//
// # Failures
//
// What goes wrong while a worker runs a session stays with that session.
// A panic of the run (a model, a bug; tools' panics are the loop's tool
// errors) or an internal error (a stored state that does not decode)
// fails the session at once, with error_code internal and an
// AgentErrorEvent that says what happened; the stack goes to the log,
// with the session's id. A crash of the process cannot be caught: the
// store counts the claims of each session since its last committed step
// or clean stop (store.Session.Attempts), and a session claimed more than
// [Options.MaxAttempts] times in a row is failed instead of run. An error
// of the store is no reason to fail a session: its lease is left to
// expire and it runs again then, the attempt counted. A claim whose
// answer was lost after it committed is not left so: the dispatcher asks
// the store what it took ([store.Store.RecoverClaim]) and runs that, so
// that a slow database costs no session an attempt. Sessions claimed
// twice in a row without progress run one at a time per manager, so that
// the one that brings the process down does not bring the same others
// down each time.
//
// # Replicas
//
// Several managers, in several processes (replicas), may share one store
// (store/postgres): any of them accepts any call for any session, since
// every change goes through the store and wakes the waiters of every
// replica ([store.Store.Subscribe]). One worker at a time runs a session,
// the one that holds its lease. A replica that dies leaves leases that
// expire after [Options.LeaseTTL]; the dispatchers of the others sleep
// until then and take the sessions over, continuing each from its last
// checkpoint, as after a restart: the model request in flight is sent
// again and server tools without a committed result run again (at least
// once). A worker that loses its lease (it stalled past its TTL) can no
// longer commit: it stops, and no step is committed twice. With a store
// that implements [store.Replicas], each manager records a heartbeat;
// [Manager.Replicas] lists them and [Manager.Health] says whether this
// one still reaches the store.
//
// # Events
//
// The event log uses the API's vocabulary. Each event has a type and a
// data payload:
//
//	AgentEvent / message_event   a user message (caller_id "user")
//	AgentStartedEvent            a worker started the session
//	ActiveStateChangeEvent       running, idle, or awaiting_tool_results
//	                             with pending_tool_calls (and the hrns
//	                             addition pending_approvals); published
//	                             again with the calls left as calls settle
//	AgentEvent / policy_event    one model step: text, reasoning, tool_reqs
//	MetricsUpdateEvent           steps and token usage after each step
//	AgentEvent / tool_result     a call's result (server-side, or posted)
//	AgentEvent / error_event     a failed call (origin "tool", "approval",
//	                             the caller's origin for posted errors,
//	                             "hrns" for calls abandoned at a deadline),
//	                             or a model request retried (origin "model")
//	AgentEvent / flow_event      pause, resume, force_answer, approve, reject
//	AgentRunStatusChangeEvent    paused, running
//	AgentEvent / answer_event    the agent's answer
//	AgentCompletionEvent         finished, stopped or timed_out
//	AgentErrorEvent              the error that failed the session
//
// The loop's chunks map onto them: turn_end to policy_event and
// MetricsUpdateEvent, tool_call_result to tool_result, tool_call_error to
// error_event, retry to error_event (origin "model"), error to
// AgentErrorEvent, and the end of a run to answer_event,
// ActiveStateChangeEvent or AgentCompletionEvent. Deltas (text,
// reasoning, argument fragments) are not logged.
//
// # Running a session
//
// A worker runs a session's agent from its checkpoint with
// [loop.Agent.RunLoop] or [loop.Agent.Resume] (a segment). It commits
// each step from the loop's chunks: the transcript of a turn_end is the
// checkpoint of the calls the step made, each tool result is committed
// as it comes. Between steps, the loop's [loop.Options.BeforeTurn] reads
// the session: when a message, a pause or a final-answer request came,
// the run yields, the worker applies the input, and a new segment goes
// on from the checkpoint. Every change of a session's state is one of
// the transitions of machine.go, each returning the events that report
// it (docs/architecture.md, "The session state machine").
//
// # Client-side tools and approvals
//
// Tools declared in the request become [loop.NewClientTool]s: when the
// model calls them the run suspends, and the session waits in
// awaiting_tool_results until [Manager.PostToolResults] has a result for
// each. A server-side tool that requires approval waits the same way for
// [Manager.Decide], unless Options.AutoApprove is set. Calls still
// unanswered when the run must end (max_time_s, force_answer) are
// answered with an error the model reads, before it is asked for its
// final answer.
//
// # Registries
//
// Package platform/registry is the API of the agents, environments and
// skills that each owner (API key) registers in the store ([AgentSpec],
// [EnvironmentSpec], [SkillSpec]): it keeps each owner's apart, and lists
// the operator's agents ([Options.Agents], and their [Options.Catalog]
// names) and environment kinds as read-only entries
// ([Manager.BuiltinEntries]); the runtime validates them as sessions read
// them ([Manager.ParseEntry]). [Manager.Create] resolves the names a
// request gives ([Manager.ResolveAgent]): a registered agent becomes an inline
// definition, an environment's id its definition, and skills named by
// the agent reach the model through the skill tools of package skills,
// read from the store each time the session runs. Subagents given by
// name are resolved the same way, with the same owner: a registered one
// is kept as its definition in the parent's spec (cycles refused, the
// nesting bounded). [HCatalog] gives the agents of H Company's published
// names (web surfers) for [Options.Agents].
//
// # Quotas
//
// [Options.MaxActiveSessions] bounds each owner's active sessions;
// [Options.TokenQuota] (a [QuotaPolicy]: package platform/quota's, per
// day or month) the tokens each owner's sessions use, counted in the store ([store.Quotas]) at each step, so that
// every replica enforces the same count ([Manager.TokenQuota]).
// [Manager.WorkspaceName] names the directory of a session's files.
package session
