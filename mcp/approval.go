package mcp

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hrns-dev/hrns/internal/safetext"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
)

// approvalInput is the ID of the elicitation that asks for an approval.
const approvalInput = "hrns_approval"

// maxQuestions bounds the approvals a server waits to have answered, and
// maxSessionQuestions those of one session, so that a client cannot grow
// the table, or fill it for the others, by calling without answering.
const (
	maxQuestions        = 1024
	maxSessionQuestions = 64
)

// errForgedAnswer is the reason a call is refused when it carries answers
// (inputResponses, requestState) to no question the server is waiting on.
const errForgedAnswer = "it carried an answer to an approval question this server did not ask or no longer waits for; " +
	"approval comes only from a question the server asks"

// A callApproval is the [loop.Approver] of one call: the server's approver,
// or with AskClient the client's user, asked through an elicitation. It
// remembers a deferral, so that the server can tell it from a handler
// that suspends, and with AskClient the question to send.
//
// Asking the client takes two invocations of the tool's handler: the first
// defers the approval and the server returns the question as an input
// request, with a request state naming the question; the SDK then calls
// the handler again with the answer (multi round-trip requests, or a
// server-to-client elicitation/create for clients of older protocol
// versions, which the SDK sends and whose answer it passes on with the
// request state), and the approval reads it. An answer counts only if its
// request state names a question of [questions] about the same tool and
// arguments: a client cannot approve a call by filling inputResponses in
// itself.
type callApproval struct {
	approver  loop.Approver // nil: ask the client
	questions *questions
	ttl       time.Duration
	req       *sdk.CallToolRequest

	mu       sync.Mutex
	deferred bool
	ask      *sdk.ElicitParams
	state    string // the request state naming ask
}

// Approve implements [loop.Approver].
func (a *callApproval) Approve(ctx context.Context, ar *loop.ApprovalRequest) (loop.Decision, error) {
	if a.approver == nil {
		return a.askClient(ar)
	}
	d, err := a.approver.Approve(ctx, ar)
	if err != nil {
		return d, err
	}
	switch d.Verdict {
	case loop.Defer:
		a.setDeferred(nil, "")
	case loop.Cancel:
		// There is no run to end: the call is refused.
		d.Verdict = loop.Reject
	}
	return d, nil
}

// askClient decides from the user's answer when the call carries the
// answer to a question the server asked about it, and defers with a new
// question otherwise.
func (a *callApproval) askClient(ar *loop.ApprovalRequest) (loop.Decision, error) {
	p := a.req.Params
	if p.RequestState != "" || len(p.InputResponses) > 0 {
		if !a.questions.answer(p.RequestState, a.req.Session, &ar.Call, time.Now()) {
			return loop.Decision{Verdict: loop.Reject, Reason: errForgedAnswer}, nil
		}
		er, _ := p.InputResponses[approvalInput].(*sdk.ElicitResult)
		if er != nil && er.Action == "accept" && er.Content["approve"] == true {
			return loop.Decision{Verdict: loop.Approve}, nil
		}
		return loop.Decision{Verdict: loop.Reject, Reason: "the user did not approve it"}, nil
	}
	if !canElicit(a.req.Session) {
		return loop.Decision{}, errors.New("this MCP client cannot ask its user: it does not support elicitation")
	}
	ask, err := approvalQuestion(ar.Call)
	if err != nil {
		return loop.Decision{}, err
	}
	state, err := a.questions.ask(a.req.Session, &ar.Call, time.Now().Add(a.ttl))
	if err != nil {
		return loop.Decision{}, err
	}
	a.setDeferred(ask, state)
	return loop.Decision{Verdict: loop.Defer}, nil
}

// maxQuestionArgs bounds the arguments shown in an approval question. A
// call whose arguments are longer is not asked about (a person cannot judge
// what they are not shown whole) and is refused.
const maxQuestionArgs = 64 << 10

// approvalQuestion is the question about call that the client's user
// answers. The tool's name and arguments come from the model: they are shown
// escaped (safetext), so that control characters, escape sequences, bidi
// and invisible characters cannot hide or disguise what would run, and
// whole, never cut.
func approvalQuestion(call llm.ToolCall) (*sdk.ElicitParams, error) {
	args := strings.TrimSpace(string(call.Arguments))
	if args == "" || args == "null" {
		args = "{}"
	}
	if len(args) > maxQuestionArgs {
		return nil, fmt.Errorf("its arguments (%d bytes) are too long to show the user whole for approval; the operator can allow the tool with --yes", len(args))
	}
	name := safetext.Escape(call.Name)
	return &sdk.ElicitParams{
		Message: fmt.Sprintf("Allow the tool %s to run with these arguments?\n%s", name, safetext.Escape(args)),
		RequestedSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"approve": map[string]any{"type": "boolean", "title": "Run " + name},
			},
			"required": []string{"approve"},
		},
	}, nil
}

// canElicit reports whether the client of ss said it can ask its user.
func canElicit(ss *sdk.ServerSession) bool {
	if ss == nil {
		return false
	}
	ip := ss.InitializeParams()
	return ip != nil && ip.Capabilities != nil && ip.Capabilities.Elicitation != nil
}

func (a *callApproval) setDeferred(ask *sdk.ElicitParams, state string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.deferred, a.ask, a.state = true, ask, state
}

// outcome reports whether the approval was deferred, and the question for
// the client's user if there is one with the request state that names it.
// A nil a was never asked.
func (a *callApproval) outcome() (deferred bool, ask *sdk.ElicitParams, state string) {
	if a == nil {
		return false, nil, ""
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.deferred, a.ask, a.state
}

// questions are the approvals a [Server] asked its clients about and is
// waiting to have answered. Each is named by a random token, sent to the
// client as the request state of the question and echoed back with the
// answer; the token is the only way to answer, it answers only a call of
// the same tool with the same arguments in the same session, only once,
// and only until its deadline.
type questions struct {
	mu sync.Mutex
	m  map[string]question // by token
}

// A question is what one token may answer.
type question struct {
	session  *sdk.ServerSession
	call     [sha256.Size]byte // see callDigest
	deadline time.Time
}

// ask records a question about call in session ss, answerable until
// deadline, and returns its token.
func (q *questions) ask(ss *sdk.ServerSession, call *llm.ToolCall, deadline time.Time) (string, error) {
	var b [32]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	token := base64.RawURLEncoding.EncodeToString(b[:])
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.m == nil {
		q.m = map[string]question{}
	}
	now, mine := time.Now(), 0
	for t, qu := range q.m {
		switch {
		case now.After(qu.deadline):
			delete(q.m, t)
		case qu.session == ss:
			mine++
		}
	}
	if mine >= maxSessionQuestions || len(q.m) >= maxQuestions {
		return "", fmt.Errorf("too many approvals are already waiting for an answer (%d of this client's, %d in all)", mine, len(q.m))
	}
	q.m[token] = question{session: ss, call: callDigest(call), deadline: deadline}
	return token, nil
}

// answer reports whether token names a question about call in session ss
// that is still open at now, and closes it: a token answers once. A token
// presented for another call is closed too, so that it cannot be tried
// again.
func (q *questions) answer(token string, ss *sdk.ServerSession, call *llm.ToolCall, now time.Time) bool {
	if token == "" {
		return false
	}
	q.mu.Lock()
	qu, ok := q.m[token]
	delete(q.m, token)
	q.mu.Unlock()
	if !ok || now.After(qu.deadline) || qu.session != ss {
		return false
	}
	d := callDigest(call)
	return subtle.ConstantTimeCompare(qu.call[:], d[:]) == 1
}

// callDigest identifies a call by its tool and its arguments.
func callDigest(call *llm.ToolCall) [sha256.Size]byte {
	h := sha256.New()
	fmt.Fprintf(h, "%d:%s", len(call.Name), call.Name)
	h.Write(call.Arguments)
	var d [sha256.Size]byte
	h.Sum(d[:0])
	return d
}
