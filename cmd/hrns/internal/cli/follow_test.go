package cli

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/hrns-dev/hrns/client"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/session"
)

// followedRun is a session run to its end by the SDK while a second reader
// follows its event stream, across whatever happens to the servers.
type followedRun struct {
	res      *client.Result
	err      error
	followed []session.Event
}

// runFollowed starts a session through c with tool, follows its events
// and waits for it to finish.
func runFollowed(ctx context.Context, c *client.Client, req *client.SessionRequest, tool *loop.ToolDef) followedRun {
	var run followedRun
	h, err := c.StartSession(ctx, req, tool)
	if err != nil {
		run.err = err
		return run
	}
	var streamErr error
	var fw sync.WaitGroup
	fw.Go(func() {
		for e, err := range h.Stream(ctx) {
			if err != nil {
				streamErr = fmt.Errorf("stream: %w", err)
				return
			}
			run.followed = append(run.followed, e)
		}
	})
	res, err := h.WaitForCompletion(ctx, tool)
	fw.Wait()
	run.res, run.err = res, errors.Join(err, streamErr)
	return run
}
