package client_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/hrns-dev/hrns/client"
	"github.com/hrns-dev/hrns/openai"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/platform/schedule"
	"github.com/hrns-dev/hrns/server"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store/sqlite"
)

func TestSchedules(t *testing.T) {
	model := openaitest.NewServer()
	t.Cleanup(model.Close)
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "hrns.db"), &sqlite.Options{RelaxedSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	m := session.New(st, &openai.Client{BaseURL: model.URL(), Model: "test-model"}, &session.Options{
		Agents: map[string]*session.AgentConfig{"reporter": {Description: "Reports."}},
	})
	srv := httptest.NewServer(newServer(m, &server.Options{APIKeys: []string{"sk-a", "sk-b"}, Schedules: schedule.New(m, st, nil)}))
	t.Cleanup(srv.Close)
	ctx := t.Context()
	c := client.New(srv.URL, "sk-a", nil)
	spec := &client.ScheduleSpec{
		Name:           "report",
		Timing:         client.ScheduleTiming{Expression: "0 9 * * *", Timezone: "America/New_York"},
		SessionRequest: &client.SessionRequest{Agent: client.AgentRef{Name: "reporter"}, Messages: client.Text("go")},
	}
	sc, err := c.CreateSchedule(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	bad := *spec
	bad.Timing.Timezone = "America/Atlantis"
	if _, err := c.CreateSchedule(ctx, &bad); !errors.Is(err, client.ErrInvalid) {
		t.Errorf("unknown zone: %v, want ErrInvalid", err)
	}
	if _, err := client.New(srv.URL, "sk-b", nil).GetSchedule(ctx, sc.ID); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("another key's schedule: %v, want ErrNotFound", err)
	}
	name := "evening report"
	up, err := c.UpdateSchedule(ctx, sc.ID, &client.ScheduleUpdate{Name: &name, Timing: &client.ScheduleTiming{Expression: "0 18 * * *", Timezone: "America/New_York"}})
	if err != nil || up.Name != name || up.Timing.Expression != "0 18 * * *" {
		t.Errorf("UpdateSchedule = %+v, %v", up, err)
	}
	if p, err := c.PauseSchedule(ctx, sc.ID, "holidays"); err != nil || !p.Paused || *p.PauseNote != "holidays" {
		t.Errorf("PauseSchedule = %+v, %v", p, err)
	}
	if p, err := c.PauseSchedule(ctx, sc.ID, ""); err != nil || !p.Paused || p.PauseNote != nil {
		t.Errorf("PauseSchedule without a note = %+v, %v", p, err)
	}
	if r, err := c.ResumeSchedule(ctx, sc.ID); err != nil || r.Paused || len(r.NextRunTimes) == 0 {
		t.Errorf("ResumeSchedule = %+v, %v", r, err)
	}
	run, err := c.TriggerSchedule(context.Background(), sc.ID)
	if err != nil || run.SessionID == nil {
		t.Fatalf("TriggerSchedule = %+v, %v", run, err)
	}
	if s, err := c.Session(*run.SessionID).Get(ctx); err != nil || s.ID != *run.SessionID {
		t.Errorf("the triggered session: %+v, %v", s, err)
	}
	list, err := c.ListSchedules(ctx, &client.PageOptions{Size: 5, Ascending: true})
	if err != nil || list.Total != 1 || list.Items[0].ID != sc.ID {
		t.Errorf("ListSchedules = %+v, %v", list, err)
	}
	runs, err := c.ScheduleRuns(ctx, sc.ID, &client.PageOptions{Page: 1})
	if err != nil || runs.Total != 1 || runs.Items[0].ID != run.ID {
		t.Errorf("ScheduleRuns = %+v, %v", runs, err)
	}
	if err := c.DeleteSchedule(ctx, sc.ID); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteSchedule(ctx, sc.ID); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("deleting twice: %v, want ErrNotFound", err)
	}
}
