package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/hrns-dev/hrns/client"
	"github.com/hrns-dev/hrns/client/userdesktop"
	"github.com/hrns-dev/hrns/internal/safetext"
)

const desktopUsage = `Usage:
  hrns desktop connect --session ID [flags]

Runs a session's computer actions on this machine's display. A session of
hrns serve whose agent has a desktop on the user's device
({"kind": "desktop", "host": "user_device"}, or "desktop") waits for them,
as for client-side tools; this follows the session until it ends, shows
each action on the terminal and runs it on $DISPLAY if you answer y, then
posts what it did with a screenshot the agent sees. With --yes, actions run
without asking, except those carrying a provider's safety checks.

The API key is $HRNS_API_KEY; the server is --url (default $HRNS_URL, else
http://127.0.0.1:8080).
`

// desktopCommand runs "hrns desktop SUBCOMMAND".
func desktopCommand(ctx context.Context, args []string, stdio *IO) error {
	if len(args) == 0 {
		return usagef("desktop needs a subcommand\n\n%s", desktopUsage)
	}
	switch args[0] {
	case "connect":
		return desktopConnect(ctx, args[1:], stdio)
	case "help", "-h", "--help":
		fmt.Fprint(stdio.Out, desktopUsage)
		return nil
	}
	return usagef("unknown desktop subcommand %q\n\n%s", args[0], desktopUsage)
}

// desktopConnect is "hrns desktop connect": the bridge between a session
// and this machine's display (client/userdesktop), with the terminal's
// approval prompt.
func desktopConnect(ctx context.Context, args []string, stdio *IO) error {
	fs := commandFlags("hrns desktop connect", desktopUsage, stdio)
	defURL := stdio.getenv("HRNS_URL")
	if defURL == "" {
		defURL = "http://127.0.0.1:8080"
	}
	url := fs.String("url", defURL, "base URL of the sessions API (hrns serve)")
	id := fs.String("session", "", "the ID of the session whose actions to run (required)")
	yes := fs.Bool("yes", false, "run every action without asking (actions with a provider's safety checks are still asked about)")
	display := fs.String("display", "", "X display to act on (default $DISPLAY)")
	if err := parseFlagsOnly(fs, args); err != nil {
		return err
	}
	if *id == "" {
		return usagef("desktop connect needs --session ID\n\n%s", desktopUsage)
	}
	key := stdio.getenv("HRNS_API_KEY")
	if key == "" {
		return usagef("desktop connect needs the API key in $HRNS_API_KEY")
	}
	if *display == "" {
		*display = stdio.getenv("DISPLAY")
	}
	if *display == "" {
		return usagef("desktop connect needs an X display: $DISPLAY is not set (or pass --display)")
	}
	interactive := stdio.interactive()
	if !*yes && !interactive {
		return usagef("desktop connect asks before each action, and there is no terminal to ask on: run it on one, or pass --yes")
	}
	answers := make(chan string)
	done := make(chan struct{})
	defer close(done)
	if interactive {
		go readAnswers(stdio.In, answers, done)
	}
	approve := func(ctx context.Context, p *userdesktop.Proposal) (bool, error) {
		if !interactive {
			fmt.Fprintf(stdio.Err, "%sNo terminal to ask on: refused.\n", p)
			return false, nil
		}
		fmt.Fprintf(stdio.Err, "\n%sAllow? [y/N] ", p)
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case a, ok := <-answers:
			if !ok {
				return false, errors.New("the terminal closed")
			}
			a = strings.ToLower(strings.TrimSpace(a))
			return a == "y" || a == "yes", nil
		}
	}
	report := func(p *userdesktop.Proposal, outcome string) {
		fmt.Fprintf(stdio.Err, "computer: %s: %s\n", p.Summary, outcome)
	}
	var mark func(string) string
	if stdio.errTerminal() {
		mark = reverseVideo // as the run's approvals mark escapes
	}
	c := client.New(*url, key, nil)
	fmt.Fprintf(stdio.Err, "hrns: running the computer actions of session %s on display %s (Ctrl-C to stop)\n", safetext.Escape(*id), safetext.Escape(*display))
	res, err := userdesktop.Run(ctx, c.Session(*id), &userdesktop.Options{Display: *display, Approve: approve, ApproveAll: *yes, Report: report, Mark: mark})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdio.Err, "hrns: session %s ended %s\n", safetext.Escape(res.SessionID), res.Status)
	if res.Error != "" {
		fmt.Fprintf(stdio.Err, "hrns: %s\n", safetext.EscapeText(res.Error))
	}
	if res.Answer != "" {
		fmt.Fprintln(stdio.Out, safetext.EscapeText(res.Answer))
	}
	return nil
}

// readAnswers sends each line read from in (at most 1 KiB of it) on out
// until done is closed, and closes out at the end of in.
func readAnswers(in io.Reader, out chan<- string, done <-chan struct{}) {
	defer close(out)
	r := bufio.NewReaderSize(in, 1024)
	for {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = r.ReadSlice('\n') // the rest of an overlong line
			}
			line = nil // not an answer
		}
		if len(line) > 0 || err == nil {
			select {
			case out <- string(line):
			case <-done:
				return
			}
		}
		if err != nil {
			return
		}
	}
}
