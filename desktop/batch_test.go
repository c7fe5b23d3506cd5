package desktop

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// scriptRunner is a runner that records the tools' command lines and
// answers them: the screen's size, a screenshot of it, and failure for a
// command line holding fail.
type scriptRunner struct {
	mu   sync.Mutex
	w, h int
	fail string
	ran  []string
}

func (r *scriptRunner) run(_ context.Context, argv []string, _ int) ([]byte, error) {
	line := strings.Join(argv, " ")
	r.mu.Lock()
	r.ran = append(r.ran, line)
	r.mu.Unlock()
	switch {
	case line == "xdotool getdisplaygeometry":
		return fmt.Appendf(nil, "%d %d\n", r.w, r.h), nil
	case argv[0] == "xwd":
		return xwdOf(testImage(r.w, r.h), 0, 0), nil
	case r.fail != "" && strings.Contains(line, r.fail):
		return nil, errors.New("exit status 1")
	}
	return nil, nil
}

func (r *scriptRunner) lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.ran...)
}

// TestBatch: a batch's actions are done in turn, with one screenshot
// after the last; the batch stops at an action that fails, saying which
// were not done, and still answers with a screenshot.
func TestBatch(t *testing.T) {
	r := &scriptRunner{w: 640, h: 400}
	d, err := newDesktop(context.Background(), r, &Options{Settle: -1})
	if err != nil {
		t.Fatal(err)
	}
	a, err := ParseAction([]byte(`{"action":"batch","actions":[
		{"action":"left_click","coordinate":[10,20]},
		{"action":"type","text":"hello"},
		{"action":"key","text":"Return"},
		{"action":"mouse_move","coordinate":[5,6],"text":"shift"}]}`), 640, 400)
	if err != nil {
		t.Fatal(err)
	}
	res, err := d.Do(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	got := r.lines()[1:]
	want := []string{
		"xdotool mousemove 10 20 click --repeat 1 --delay 80 1",
		"xdotool type --delay 12 -- hello",
		"xdotool key --delay 50 -- Return",
		"xdotool keydown shift mousemove 5 6 keyup shift",
		"xwd -root -silent",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("ran:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if res.Failed || res.Image == nil || res.Text != "Clicked at [10, 20]. Typed 5 characters. Pressed Return. Moved the pointer at [5, 6] holding shift." {
		t.Fatalf("result %q failed=%v image=%d bytes", res.Text, res.Failed, len(res.Image))
	}

	r.fail = "type"
	n := len(r.lines())
	res, err = d.Do(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	got = r.lines()[n:]
	if len(got) != 3 || !strings.HasPrefix(got[1], "xdotool type") || got[2] != "xwd -root -silent" {
		t.Fatalf("after a failure, ran %q", got)
	}
	if !res.Failed || res.Image == nil || !strings.Contains(res.Text, "The action (Typed 5 characters) failed") || !strings.HasSuffix(res.Text, "The 2 actions after it were not done.") {
		t.Fatalf("result %q failed=%v image=%d bytes", res.Text, res.Failed, len(res.Image))
	}
}

// TestParseBatch: what a batch may hold.
func TestParseBatch(t *testing.T) {
	many := strings.Repeat(`{"action":"screenshot"},`, MaxBatch)
	for _, c := range []struct{ args, err string }{
		{`{"action":"batch","actions":[{"action":"screenshot"}]}`, ""},
		{`{"action":"batch","actions":[{"action":"left_click","coordinate":[1,2]},{"action":"wait","duration":1}]}`, ""},
		{`{"action":"batch"}`, "needs actions"},
		{`{"action":"batch","actions":[]}`, "needs actions"},
		{`{"action":"batch","actions":[` + many + `{"action":"screenshot"}]}`, "at most 16"},
		{`{"action":"batch","actions":[{"action":"batch","actions":[{"action":"screenshot"}]}]}`, "single actions"},
		{`{"action":"batch","actions":[{"action":"left_click","coordinate":[9999,2]}]}`, "actions[0]: coordinate"},
		{`{"action":"batch","actions":[{"action":"screenshot","bogus":1}]}`, "not a computer action"},
		{`{"action":"batch","text":"x","actions":[{"action":"screenshot"}]}`, "only actions"},
		{`{"action":"batch","actions":[{"action":"wait","duration":20},{"action":"wait","duration":20}]}`, "at most 30"},
		{`{"action":"batch","actions":[{"action":"type","text":"` + strings.Repeat("x", MaxText) + `"},{"action":"type","text":"y"}]}`, "types 4001 characters"},
		{`{"action":"screenshot","actions":[{"action":"screenshot"}]}`, "takes no actions"},
		{`{"action":"left_click_drag","coordinate":[5,5],"text":"alt"}`, ""},
	} {
		_, err := ParseAction([]byte(c.args), 640, 400)
		if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("ParseAction(%.100s) = %v; want %q", c.args, err, c.err)
		}
	}
}
