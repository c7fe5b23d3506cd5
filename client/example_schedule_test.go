package client_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/hrns-dev/hrns/client"
	"github.com/hrns-dev/hrns/openai"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/platform/schedule"
	"github.com/hrns-dev/hrns/server"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store/sqlite"
)

// ExampleClient_CreateSchedule creates a schedule that starts a session at
// 09:00 on weekdays in Paris, fires it once now with a trigger, and
// follows the session it created. The server is the real one, in process,
// with a scripted model; hrns serve runs the scheduler's worker, which
// fires the ticks.
func ExampleClient_CreateSchedule() {
	model := openaitest.NewServer(openaitest.Reply{Text: "Nothing new overnight."})
	defer model.Close()
	dir, _ := os.MkdirTemp("", "hrns-example")
	defer os.RemoveAll(dir)
	st, _ := sqlite.Open(filepath.Join(dir, "hrns.db"), nil)
	defer st.Close()
	m := session.New(st, &openai.Client{BaseURL: model.URL(), Model: "test-model"}, nil)
	m.Start(context.Background())
	defer m.Stop(context.Background())
	sch := schedule.New(m, st, nil)
	h, _ := server.New(m, &server.Options{APIKeys: []string{"sk-example"}, Schedules: sch})
	srv := httptest.NewServer(h)
	defer srv.Close()

	ctx := context.Background()
	c := client.New(srv.URL, "sk-example", nil)
	sc, err := c.CreateSchedule(ctx, &client.ScheduleSpec{
		Name:   "morning digest",
		Timing: client.ScheduleTiming{Expression: "0 9 * * 1-5", Timezone: "Europe/Paris"},
		SessionRequest: &client.SessionRequest{
			Agent:    client.AgentRef{Inline: &client.Agent{Name: "digest"}},
			Messages: client.Text("Summarise what happened overnight."),
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(sc.Name, sc.Timing.Expression, sc.Timing.Timezone, len(sc.NextRunTimes), "upcoming ticks")

	run, err := c.TriggerSchedule(ctx, sc.ID)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("run:", run.Status, "manual:", run.TriggeredManually)
	res, err := c.Session(*run.SessionID).WaitForCompletion(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("session:", res.Status, "-", res.Answer)
	runs, _ := c.ScheduleRuns(ctx, sc.ID, nil)
	fmt.Println("runs:", runs.Total)
	// Output:
	// morning digest 0 9 * * 1-5 Europe/Paris 5 upcoming ticks
	// run: created manual: true
	// session: completed - Nothing new overnight.
	// runs: 1
}
