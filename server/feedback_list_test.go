package server_test

import (
	"net/http"
	"testing"

	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/session"
)

// TestFeedbackListed: the feedback given on a session and its events is
// listed, to its key only.
func TestFeedbackListed(t *testing.T) {
	e := newEnv(t, nil, openaitest.Reply{Text: "done"})
	id := e.create(keyAlice, `{"agent":{"name":"support-agent"},"messages":"Hi."}`)
	e.follow(keyAlice, id).status(session.StatusCompleted)
	base := "/api/v2/sessions/" + id
	var l session.FeedbackList
	e.expect(e.do("GET", base+"/feedback", keyAlice, nil), http.StatusOK).json(&l)
	if l.Session != nil || len(l.Events) != 0 {
		t.Errorf("before any feedback: %+v", l)
	}
	e.expect(e.do("POST", base+"/feedback", keyAlice, `{"success":true,"message":"right answer"}`), http.StatusNoContent)
	e.expect(e.do("PUT", base+"/events/2/feedback", keyAlice, `{"success":false}`), http.StatusNoContent)
	e.expect(e.do("PUT", base+"/events/0/feedback", keyAlice, `{"success":true}`), http.StatusNoContent)
	e.expect(e.do("GET", base+"/feedback", keyAlice, nil), http.StatusOK).json(&l)
	if l.Session == nil || !l.Session.Success || l.Session.Message == nil || *l.Session.Message != "right answer" ||
		len(l.Events) != 2 || l.Events[0].EventIndex != 0 || !l.Events[0].Success || l.Events[1].EventIndex != 2 || l.Events[1].Success {
		t.Errorf("feedback = %+v", l)
	}
	e.expect(e.do("GET", base+"/feedback", keyBob, nil), http.StatusNotFound)
}

// TestSharedTrajectory: a share link gives the session's events without
// a key, paged, until it is revoked; a forged token gets nothing.
func TestSharedTrajectory(t *testing.T) {
	e := newEnv(t, nil, openaitest.Reply{Text: "done"})
	id := e.create(keyAlice, `{"agent":{"name":"support-agent"},"messages":"Hi."}`)
	e.follow(keyAlice, id).status(session.StatusCompleted)
	var link struct {
		ShareURL string `json:"share_url"`
	}
	e.expect(e.do("POST", "/api/v2/sessions/"+id+"/share", keyAlice, nil), http.StatusOK).json(&link)
	var own, shared session.Page[session.Event]
	e.expect(e.do("GET", "/api/v2/sessions/"+id+"/events", keyAlice, nil), http.StatusOK).json(&own)
	e.expect(e.do("GET", link.ShareURL+"/events", "", nil), http.StatusOK).json(&shared)
	if shared.Total != own.Total || len(shared.Items) != len(own.Items) || len(own.Items) < 3 {
		t.Fatalf("shared events %d of %d, the owner's %d of %d", len(shared.Items), shared.Total, len(own.Items), own.Total)
	}
	var page session.Page[session.Event]
	e.expect(e.do("GET", link.ShareURL+"/events?size=1&page=2&sort=-timestamp", "", nil), http.StatusOK).json(&page)
	if len(page.Items) != 1 || page.Items[0].Index != own.Items[len(own.Items)-2].Index {
		t.Errorf("page 2 of 1, newest first: %+v", page.Items)
	}
	e.expect(e.do("GET", link.ShareURL+"/events?size=0", "", nil), http.StatusUnprocessableEntity)
	e.expect(e.do("GET", "/api/v2/shared/"+id+".0000/events", "", nil), http.StatusNotFound)
	e.expect(e.do("GET", "/api/v2/shared/"+id+"/events", "", nil), http.StatusNotFound)
	e.expect(e.do("DELETE", "/api/v2/sessions/"+id+"/share", keyAlice, nil), http.StatusNoContent)
	e.expect(e.do("GET", link.ShareURL+"/events", "", nil), http.StatusNotFound)
}
