package cli

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"strings"
	"testing"
)

// writes counts the writes made to it.
type writes struct {
	bytes.Buffer
	n int
}

func (w *writes) Write(p []byte) (int, error) { w.n++; return w.Buffer.Write(p) }

// TestPrintUsageOneWrite: a command's help is what the flag package's
// PrintDefaults wrote, after the usage line, in one write.
func TestPrintUsageOneWrite(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.String("model", "gpt", "the `name` of the model")
	fs.Bool("json", false, "JSON lines")
	fs.Int("n", 3, "how many\nat most")
	fs.Duration("timeout", 0, "a timeout")
	var list stringList
	fs.Var(&list, "allow", "a rule (repeatable)")
	var old writes
	fs.SetOutput(&old)
	fmt.Fprintln(&old, "Usage: x [flags]\n\nFlags:")
	fs.PrintDefaults()
	var w writes
	fs.SetOutput(&w)
	printUsage(fs, &w, "Usage: x [flags]")
	if w.String() != old.String() || w.n != 1 {
		t.Errorf("printUsage wrote %q in %d writes; want %q in one", w.String(), w.n, old.String())
	}
	if fs.Output() != &w {
		t.Error("printUsage left the flag set writing elsewhere")
	}

	var out, errw writes
	if code := Run(context.Background(), []string{"run", "--help"}, &IO{Out: &out, Err: &errw}); code != ExitOK {
		t.Fatalf("hrns run --help: exit %d", code)
	}
	if errw.n != 1 || !strings.HasPrefix(errw.String(), "Usage: hrns run [flags] \"PROMPT\"\n\nFlags:\n  -agent string\n") {
		t.Errorf("hrns run --help: %d writes of %.80q…", errw.n, errw.String())
	}
}
