package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/bench/internal/mock"
)

func TestParseBench(t *testing.T) {
	out := `goos: linux
BenchmarkStream/text/raw         	     500	    562015 ns/op	      5456 ns/chunk	      4000 cpu-ns/chunk	   74319 B/op	    1185 allocs/op
BenchmarkStream/text/raw-2       	     500	    462015 ns/op	      4456 ns/chunk	      3000 cpu-ns/chunk	   74319 B/op	    1185 allocs/op
BenchmarkStream/text/raw         	     500	    662015 ns/op	      6456 ns/chunk	      5000 cpu-ns/chunk	   74319 B/op	    1185 allocs/op
BenchmarkStream/text/hrns        	     500	    1 ns/op	      2 ns/chunk	      3 cpu-ns/chunk	   4 B/op	    5 allocs/op
PASS
`
	res := parseBench([]byte(out))
	if len(res) != 2 {
		t.Fatalf("got %d benchmarks, want 2", len(res))
	}
	r := res[0]
	if r.name != "Stream/text/raw" || r.group() != "Stream/text" || r.variant() != "raw" {
		t.Errorf("name %q group %q variant %q", r.name, r.group(), r.variant())
	}
	if r.values["cpu-ns/chunk"] != 4000 || r.values["ns/op"] != 562015 || r.values["allocs/op"] != 1185 {
		t.Errorf("medians %v", r.values)
	}
	rep := &report{micro: res}
	if ref := rep.reference(res[1]); ref != res[0] {
		t.Errorf("reference of %s is %s, want the raw variant", res[1].name, ref.name)
	}
}

func TestWriteBetweenMarkers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "perf.md")
	doc := "# Title\n\nprose\n\n" + startMarker + "\nold\n" + endMarker + "\n\nmore prose\n"
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	for range 2 { // idempotent: the second write replaces the first
		if err := writeBetweenMarkers(path, "new table\n"); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := os.ReadFile(path)
	got := string(b)
	if strings.Contains(got, "old") || strings.Count(got, "new table") != 1 ||
		!strings.HasPrefix(got, "# Title\n\nprose\n\n"+startMarker) || !strings.HasSuffix(got, endMarker+"\n\nmore prose\n") {
		t.Errorf("wrote:\n%s", got)
	}
	os.WriteFile(path, []byte("no markers"), 0o644)
	if err := writeBetweenMarkers(path, "x"); err == nil {
		t.Error("no error for a file without markers")
	}
}

func TestCheckCounts(t *testing.T) {
	before := mock.Stats{ToolCallsPerRun: 5, EventsPerRun: 163}
	after := before
	after.Requests, after.ToolResults, after.Events = 12, 10, 326
	if err := checkCounts(before, after, 2); err != nil {
		t.Errorf("two whole runs: %v", err)
	}
	after.Requests--
	if err := checkCounts(before, after, 2); err == nil {
		t.Error("a missing request went unnoticed")
	}
	after.Requests++
	after.Rejected = 1
	if err := checkCounts(before, after, 2); err == nil {
		t.Error("a rejected request went unnoticed")
	}
}

func TestSelectClients(t *testing.T) {
	cs, err := selectClients("hrns-loop")
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 2 || cs[0].name != "raw" || cs[1].name != "hrns-loop" {
		t.Errorf("got %v, want the baseline then hrns-loop", cs)
	}
	if _, err := selectClients("nope"); err == nil {
		t.Error("no error for an unknown client")
	}
}
