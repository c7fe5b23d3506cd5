package cli

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/client"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/store/sqlite"
)

// TestServeSchedules: hrns serve serves the schedules and runs their
// worker. A schedule made and triggered through the API creates a session
// that runs; after the server was down for two hours, the next server
// fires the latest missed tick once at its start, and counts the others.
func TestServeSchedules(t *testing.T) {
	model := openaitest.NewServer(openaitest.Reply{Text: "first"}, openaitest.Reply{Text: "caught up"})
	defer model.Close()
	db := filepath.Join(t.TempDir(), "hrns.db")
	env := map[string]string{"OPENAI_BASE_URL": model.URL(), "OPENAI_API_KEY": "k", "HRNS_API_KEYS": "sk-a"}
	args := []string{"--model", "test-model", "--db", "sqlite:" + db}
	var id string
	t.Run("first", func(t *testing.T) {
		s := startServe(t, env, args...)
		c := client.New(s.url, "sk-a", nil)
		sc, err := c.CreateSchedule(t.Context(), &client.ScheduleSpec{
			Name:           "every five minutes",
			Timing:         client.ScheduleTiming{Expression: "*/5 * * * *", Timezone: "UTC"},
			SessionRequest: &client.SessionRequest{Agent: client.AgentRef{Inline: &client.Agent{Name: "pinger"}}, Messages: client.Text("ping")},
		})
		if err != nil {
			t.Fatal(err)
		}
		id = sc.ID
		run, err := c.TriggerSchedule(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		res, err := c.Session(*run.SessionID).WaitForCompletion(t.Context())
		if err != nil || res.Answer != "first" {
			t.Fatalf("the triggered session: %+v, %v", res, err)
		}
	})
	if t.Failed() {
		return
	}

	// The server was down: its schedule's next tick is two hours back.
	st, err := sqlite.Open(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	due, err := st.DueSchedules(context.Background(), time.Now().Add(time.Hour), 10)
	if err != nil || len(due) != 1 {
		t.Fatalf("DueSchedules = %v, %v", due, err)
	}
	due[0].NextRunAt = time.Now().Add(-2 * time.Hour).Truncate(5 * time.Minute)
	if _, err := st.UpdateSchedule(context.Background(), due[0]); err != nil {
		t.Fatal(err)
	}
	st.Close()

	t.Run("restart", func(t *testing.T) {
		s := startServe(t, env, args...)
		c := client.New(s.url, "sk-a", nil)
		var latest *client.ScheduleRun
		for range 1000 {
			runs, err := c.ScheduleRuns(t.Context(), id, nil)
			if err != nil {
				t.Fatal(err)
			}
			if runs.Total == 2 {
				for i, r := range runs.Items {
					if !r.TriggeredManually {
						latest = &runs.Items[i]
					}
				}
				break
			}
			<-time.After(10 * time.Millisecond)
		}
		if latest == nil {
			t.Fatal("the worker did not fire the missed tick")
		}
		if latest.TriggeredManually || latest.Status != "created" || latest.SkippedTicks < 20 || time.Since(latest.ScheduledFor) > 5*time.Minute {
			t.Errorf("the catch-up run = %+v; want the latest tick, with the 20 or more before it skipped", latest)
		}
		res, err := c.Session(*latest.SessionID).WaitForCompletion(t.Context())
		if err != nil || res.Answer != "caught up" {
			t.Errorf("the catch-up session: %+v, %v", res, err)
		}
	})
}
