package session

import "github.com/hrns-dev/hrns/api"

// The wire types of the sessions API live in package api, shared with
// the server and the Go SDK; these names keep the runtime's callers
// (hrns serve, the server, tests) reading as they did. New code may use
// either.

// Types of the sessions API; see package api.
type (
	Status           = api.Status
	Request          = api.Request
	AgentRef         = api.AgentRef
	Agent            = api.Agent
	SkillRef         = api.SkillRef
	Skill            = api.Skill
	Environment      = api.Environment
	ToolDefinition   = api.ToolDefinition
	UserMessage      = api.UserMessage
	FileContent      = api.FileContent
	Messages         = api.Messages
	ToolRequest      = api.ToolRequest
	ToolResult       = api.ToolResult
	Decision         = api.Decision
	Event            = api.Event
	ActiveState      = api.ActiveState
	AgentEventData   = api.AgentEventData
	ImageContent     = api.ImageContent
	Metrics          = api.Metrics
	ModelCost        = api.ModelCost
	ModelUsage       = api.ModelUsage
	StatusView       = api.StatusView
	View             = api.View
	Lease            = api.Lease
	Replica          = api.Replica
	Summary          = api.Summary
	Page[T any]      = api.Page[T]
	Changes          = api.Changes
	Quota            = api.Quota
	Feedback         = api.Feedback
	AgentSpec        = api.AgentSpec
	EnvironmentSpec  = api.EnvironmentSpec
	SkillSpec        = api.SkillSpec
	ContextCompacted = api.ContextCompacted
)

// Constants of the sessions API; see package api.
const (
	StatusQueued              = api.StatusQueued
	StatusPending             = api.StatusPending
	StatusRunning             = api.StatusRunning
	StatusPaused              = api.StatusPaused
	StatusIdle                = api.StatusIdle
	StatusAwaitingToolResults = api.StatusAwaitingToolResults
	StatusCompleted           = api.StatusCompleted
	StatusFailed              = api.StatusFailed
	StatusTimedOut            = api.StatusTimedOut
	StatusInterrupted         = api.StatusInterrupted
	CodeTimeout               = api.CodeTimeout
	CodeInternal              = api.CodeInternal
	CodeNoAnswer              = api.CodeNoAnswer
	CodeAnswerValidation      = api.CodeAnswerValidation
	EventAgentStarted         = api.EventAgentStarted
	EventAgentCompletion      = api.EventAgentCompletion
	EventAgentError           = api.EventAgentError
	EventRunStatusChange      = api.EventRunStatusChange
	EventActiveState          = api.EventActiveState
	EventMetricsUpdate        = api.EventMetricsUpdate
	EventAgent                = api.EventAgent
	EventContextCompacted     = api.EventContextCompacted
	KindPolicy                = api.KindPolicy
	KindToolResult            = api.KindToolResult
	KindAnswer                = api.KindAnswer
	KindError                 = api.KindError
	KindMessage               = api.KindMessage
	KindFlow                  = api.KindFlow
	KindObservation           = api.KindObservation
)
