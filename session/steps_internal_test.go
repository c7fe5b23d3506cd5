package session

import (
	"testing"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/store"
)

// TestStepCommits checks the rules of the table of what each step's commit
// holds (steps.go), row by row, on the commit stepCommit builds from it: a
// counted step carries its events and usage, and a commit that takes
// messages out of the inbox sets a checkpoint that holds them, but for
// messages a hook refused. Each row's behaviour through the API is tested
// by the test the row names.
func TestStepCommits(t *testing.T) {
	rows := []struct {
		end  stepEnd
		test string // the test of the row through the API
	}{
		{endAnswer, "TestScenarios/idle_follow_up"},
		{endRejected, "TestRejectedAnswerKeepsMessage"},
		{endCalls, "TestRestartMidTool"},
		{endNoAnswer, "TestNoAnswerCountsItsStep"},
		{endInvalid, "TestScenarios/answer_format"},
		{endBlocked, "TestPromptHooksSeeEveryMessage"},
		{endYield, "TestSteeringDuringRerun"},
		{endCut, "TestCutCallEvaluatedAgain"},
		{endFailure, "TestFailureFreesQueueAndTellsParent"},
	}
	if len(rows) != len(stepCommits) {
		t.Fatalf("%d rows tested, the table has %d", len(rows), len(stepCommits))
	}
	for _, r := range rows {
		row, ok := stepCommits[r.end]
		if !ok {
			t.Fatalf("no row for %d (%s)", r.end, r.test)
		}
		g := &segment{m: &Manager{}, delivered: []int64{1}, tag: "t"}
		st := &state{Inbox: []inboxMessage{{ID: 1, Message: llm.UserMessage("question")}, {ID: 2, Message: llm.UserMessage("later")}}}
		msgs := []llm.Message{llm.UserMessage("question"), {Role: llm.RoleAssistant, Parts: []llm.Part{llm.TextPart("answer")}}}
		rec := &stepRecord{model: "m", usage: llm.Usage{InputTokens: 3}, policy: agentEvent(AgentEventData{Kind: KindPolicy})}
		events := g.stepCommit(r.end, rec, msgs, nil, nil)(&store.Session{}, st)
		took := len(st.Inbox) == 1
		switch {
		case took && st.Inbox[0].ID != 2:
			t.Errorf("%s: the inbox kept %v, want the message not delivered", r.test, st.Inbox)
		case took && !row.checkpoint && r.end != endBlocked:
			t.Errorf("%s: a delivered message left the inbox without a checkpoint", r.test)
		case took != row.inbox:
			t.Errorf("%s: inbox taken %v, the table says %v", r.test, took, row.inbox)
		case row.checkpoint && st.Checkpoint.Length != int64(len(msgs)):
			t.Errorf("%s: checkpoint of %d messages, want %d", r.test, st.Checkpoint.Length, len(msgs))
		case !row.checkpoint && st.Checkpoint.Length != 0:
			t.Errorf("%s: a checkpoint was set", r.test)
		case row.step && (st.Steps != 1 || st.Usage["m"].InputTokens != 3 || len(events) != 2):
			t.Errorf("%s: steps %d, usage %v, %d events; want the step counted and reported", r.test, st.Steps, st.Usage, len(events))
		case !row.step && (st.Steps != 0 || len(events) != 0):
			t.Errorf("%s: a step was counted", r.test)
		}
	}
}
