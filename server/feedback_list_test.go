package server_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"reflect"
	"strings"
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
	link.ShareURL = strings.TrimPrefix(link.ShareURL, e.url)
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

// TestSharedEventsOnlyTheTrajectory: a share token gives its own
// session's events and nothing else: not another session's (of its key
// or of another key), not with another session's id in the token, not
// the key or the owner's identity, and no cookie; unsharing one session
// leaves another's link working.
func TestSharedEventsOnlyTheTrajectory(t *testing.T) {
	e := newEnv(t, nil, openaitest.Reply{Text: "answer of A"}, openaitest.Reply{Text: "answer of B"}, openaitest.Reply{Text: "answer of C"})
	a := e.create(keyAlice, `{"agent":{"name":"support-agent"},"messages":"first session"}`)
	e.follow(keyAlice, a).status(session.StatusCompleted)
	b := e.create(keyAlice, `{"agent":{"name":"support-agent"},"messages":"second session"}`)
	e.follow(keyAlice, b).status(session.StatusCompleted)
	c := e.create(keyBob, `{"agent":{"name":"support-agent"},"messages":"bob's session"}`)
	e.follow(keyBob, c).status(session.StatusCompleted)
	share := func(key, id string) (link, secret string) {
		var r struct {
			ShareURL string `json:"share_url"`
		}
		e.expect(e.do("POST", "/api/v2/sessions/"+id+"/share", key, nil), http.StatusOK).json(&r)
		r.ShareURL = strings.TrimPrefix(r.ShareURL, e.url)
		_, secret, _ = strings.Cut(strings.TrimPrefix(r.ShareURL, "/api/v2/shared/"), ".")
		return r.ShareURL, secret
	}
	linkA, secretA := share(keyAlice, a)
	linkB, secretB := share(keyAlice, b)
	_, secretC := share(keyBob, c)

	// A's secret with another session's id opens nothing.
	for _, id := range []string{b, c} {
		e.expect(e.do("GET", "/api/v2/shared/"+id+"."+secretA, "", nil), http.StatusNotFound)
		e.expect(e.do("GET", "/api/v2/shared/"+id+"."+secretA+"/events", "", nil), http.StatusNotFound)
	}

	sum := sha256.Sum256([]byte(keyAlice))
	ownerA := "key:" + hex.EncodeToString(sum[:8])
	never := []string{keyAlice, keyBob, ownerA, secretB, secretC, b, c, "answer of B", "answer of C", "second session", "bob's session"}
	var own session.Page[session.Event]
	e.expect(e.do("GET", "/api/v2/sessions/"+a+"/events?size=200", keyAlice, nil), http.StatusOK).json(&own)
	for _, path := range []string{linkA, linkA + "/events?size=200", linkA + "/events?type=AgentEvent", linkA + "/events?size=1&page=3&sort=-timestamp"} {
		// With Bob's key or without one, the answer is the same.
		for _, key := range []string{"", keyBob} {
			r := e.expect(e.do("GET", path, key, nil), http.StatusOK)
			for _, s := range never {
				if bytes.Contains(r.body, []byte(s)) {
					t.Errorf("GET %s (key %q) shows %q:\n%s", path, key, s, r.body)
				}
			}
			if len(r.header.Values("Set-Cookie")) != 0 || r.header.Get("Hrns-Lease") != "" {
				t.Errorf("GET %s (key %q) headers: %v", path, key, r.header)
			}
		}
	}
	var shared session.Page[session.Event]
	e.expect(e.do("GET", linkA+"/events?size=200", "", nil), http.StatusOK).json(&shared)
	if !reflect.DeepEqual(shared, own) || !bytes.Contains(e.do("GET", linkA+"/events", "", nil).body, []byte("answer of A")) {
		t.Errorf("shared events differ from the owner's:\n%+v\n%+v", shared, own)
	}

	// Unsharing A leaves B's link working.
	e.expect(e.do("DELETE", "/api/v2/sessions/"+a+"/share", keyAlice, nil), http.StatusNoContent)
	e.expect(e.do("GET", linkA+"/events", "", nil), http.StatusNotFound)
	e.expect(e.do("GET", linkA, "", nil), http.StatusNotFound)
	e.expect(e.do("GET", linkB+"/events", "", nil), http.StatusOK)
}
