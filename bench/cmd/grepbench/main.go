// Command grepbench compares hrns's grep tool with grep -rn on one tree,
// by default the Go standard library's source ($(go env GOROOT)/src):
// for each pattern it runs both in turn, -rounds times, and prints the
// median wall time of each, their ratio and what each found.
//
//	go run ./cmd/grepbench                 # GOROOT/src, 5 rounds
//	go run ./cmd/grepbench -dir ~/src/big -rounds 9
//
// grep -rn prints every match to a pipe that is read and counted; the tool
// is called as an agent calls it, with max_results at its limit (1000),
// and its matching lines are counted. The patterns match fewer lines than
// that, so both read the whole tree. The tool skips what .gitignore
// ignores, binary files and symbolic links; grep -rn does not, so on a
// tree with ignored or binary files the tool does less work.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/tools"
)

func main() {
	dir := flag.String("dir", "", "the tree to search (default: $(go env GOROOT)/src)")
	rounds := flag.Int("rounds", 5, "runs of each side for each pattern")
	flag.Parse()
	if err := run(*dir, *rounds); err != nil {
		fmt.Fprintln(os.Stderr, "grepbench:", err)
		os.Exit(1)
	}
}

type bench struct {
	name, pattern string
	ignoreCase    bool
}

var benches = []bench{
	{"literal", "errors.Join", false},
	{"regexp", `func \(\w+ \*Reader\) Read\w*\(`, false},
	{"ignore case", "deprecated: use", true},
	{"no match", "zq_no_such_text_qz", false},
}

func run(dir string, rounds int) error {
	if dir == "" {
		out, err := exec.Command("go", "env", "GOROOT").Output()
		if err != nil {
			return fmt.Errorf("go env GOROOT: %w", err)
		}
		dir = filepath.Join(strings.TrimSpace(string(out)), "src")
	}
	ts, err := tools.Grep(dir, nil)
	if err != nil {
		return err
	}
	fmt.Printf("tree: %s\nrounds: %d (medians)\n\n", dir, rounds)
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "pattern\tgrep -rn\thrns grep\tratio\tgrep lines\thrns lines\t")
	for _, b := range benches {
		var gt, ht []time.Duration
		var gn, hn int
		for range rounds {
			d, n, err := grepRN(dir, b)
			if err != nil {
				return err
			}
			gt, gn = append(gt, d), n
			d, n, err = hrnsGrep(ts, b)
			if err != nil {
				return err
			}
			ht, hn = append(ht, d), n
		}
		g, h := median(gt), median(ht)
		fmt.Fprintf(tw, "%s\t%v\t%v\t%.2f×\t%d\t%d\t\n", b.name, g.Round(time.Millisecond), h.Round(time.Millisecond), float64(h)/float64(g), gn, hn)
	}
	return tw.Flush()
}

func grepRN(dir string, b bench) (time.Duration, int, error) {
	args := []string{"-rnE"}
	if b.ignoreCase {
		args = append(args, "-i")
	}
	cmd := exec.Command("grep", append(args, "--", b.pattern, dir)...)
	var out bytes.Buffer
	cmd.Stdout = &out
	start := time.Now()
	err := cmd.Run()
	d := time.Since(start)
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 1 {
		err = nil // no match
	}
	return d, bytes.Count(out.Bytes(), []byte("\n")), err
}

func hrnsGrep(ts *loop.Toolset, b bench) (time.Duration, int, error) {
	args, _ := json.Marshal(map[string]any{"pattern": b.pattern, "case_insensitive": b.ignoreCase, "max_results": 1000})
	start := time.Now()
	out, err := ts.Invoke(context.Background(), llm.ToolCall{ID: "1", Name: "grep", Arguments: args}, &loop.InvokeOptions{MaxOutput: -1})
	d := time.Since(start)
	if err != nil {
		return 0, 0, err
	}
	text := out.Content[0].Text
	if strings.HasPrefix(text, "(no line matches") {
		return d, 0, nil
	}
	if strings.Contains(text, "[stopped at") || strings.Contains(text, "[output cut") {
		return 0, 0, fmt.Errorf("%s: the result was cut; pick a rarer pattern", b.name)
	}
	return d, strings.Count(text, "\n"), nil
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}
