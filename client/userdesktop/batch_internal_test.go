package userdesktop

import (
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/desktop"
)

// TestDescribeBatch: a batch of actions (OpenAI's batched computer call)
// is shown action by action, with the text each types escaped.
func TestDescribeBatch(t *testing.T) {
	a, err := desktop.ParseAction([]byte(`{"action":"batch","actions":[{"action":"left_click","coordinate":[10,20]},{"action":"type","text":"invoice\u202efdp.exe"},{"action":"key","text":"Return"}]}`), 1280, 800)
	if err != nil {
		t.Fatal(err)
	}
	var p Proposal
	describe(&p, a, nil)
	got := p.Summary + "\n" + strings.Join(p.Text, "\n")
	want := "3 actions, in turn:\n1. left click at [10, 20]\n2. type 15 characters:\n   invoice\\u202efdp.exe\n3. press the keys Return"
	if got != want || p.Escaped != 1 {
		t.Fatalf("shown:\n%s\nwant:\n%s\n(%d escaped)", got, want, p.Escaped)
	}
}
