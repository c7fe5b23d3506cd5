//go:build linux

package cmdline_test

// The differential test of issue 32, finding 1: every line of a corpus
// (and every line the fuzzer makes) goes through Parse and through the
// real shells that run it, dash (/bin/sh on Debian and Ubuntu) and bash,
// and the commands the shells run must be commands Parse saw. The shells
// are the oracle: they run the line in the sandbox with a PATH of
// recording stubs, one for every name the line could spell, each of which
// writes its arguments to a log and exits 0 (sh, bash and dash record and
// then run the shell under test, so that nested scripts are checked too).

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/loop/cmdline"
	"github.com/hrns-dev/hrns/sandbox"
)

// shellCorpus holds lines of every form Parse takes apart, the forms dash
// and bash read differently, and the attacks of issue 32.
var shellCorpus = []string{
	"git status",
	"git status --short; rm -rf x",
	"git status && rm -rf x || id",
	"git status | rm -rf x",
	"git status & rm -rf x",
	"git status\nrm -rf x",
	"(git status; rm -rf x)",
	"{ git status; rm -rf x; }",
	"git status $(rm -rf x)",
	"git status `rm -rf x`",
	`git "status" 'x y' "a\"b" a\ b`,
	`g\it st\atus`,
	"git stat\\\nus",
	"git status \\\n && rm x",
	"git status # ; rm -rf x",
	"git status #\\\nrm x",
	"echo a#b; rm x",
	`echo "a;b" 'c && d'`,
	"! git status",
	"git status 2>&1 >/dev/null",
	"git status >/dev/null 2>&1 </dev/null",
	"git status >| /dev/null",
	"git status > out.txt",
	"git status 2> err.txt; rm x",
	"git status <> f",
	"FOO=bar git status",
	"X=rm; $X -rf x",
	`eval "$X"; eval rm x`,
	"eval 'git status; rm -rf x'",
	"sh -c 'rm -rf x'",
	"sh -c 'git status; sh -c \"rm -rf y\"'",
	`bash -lc "git status; rm -rf x"`,
	"dash -c 'id' && bash -c 'ls'",
	"command rm -rf x",
	"command -p -- rm x",
	"exec rm -rf x",
	"builtin echo hi; rm x",
	"trap 'rm -rf x' EXIT; git status",
	"trap -- 'id' EXIT",
	"git() { rm -rf x; }; git status",
	"if git status; then rm -rf x; else id; fi",
	"for f in a b; do rm $f; done",
	"while false; do rm x; done; until true; do id; done",
	"case x in x) rm -rf x;; *) id;; esac",
	"[ -f x ] && rm x",
	"[[ -f x ]] && rm x",
	"test -f x || rm x",
	"time git status",
	"export A=b; rm x",
	"local a=b 2>/dev/null; rm x",
	"readonly R=1; id",
	"echo $'a\\nb'; rm x",
	"echo $((1+2)); rm x",
	"echo {a,b}; rm x",
	"ls ~; rm x",
	"ls *.go; rm x",
	"git status &>/dev/null sh -c 'id > f'",
	"git status &>/dev/null rm -rf x",
	"git status &>>/dev/null rm -rf x",
	"git status >&/dev/null rm x",
	"git status |& rm x",
	"cat <<<x; rm y",
	"git status <(rm -rf x)",
	"cat <<'EOF'\nhello $X $(rm x)\nEOF",
	"cat <<EOF\nhello $(rm -rf x)\nEOF",
	"cat <<EOF\nplain text\nEOF\nrm x",
	"cat <<\"EOF\"\n`id`\nEOF",
	"cat <<-EOF\n\tindented\n\tEOF\nrm x",
	"cat <<A; cat <<B\na\nA\nb\nB\nid",
	"cat <<EOF | rm -rf x\nbody\nEOF",
	"cat <<EOF && rm x\nbody\nEOF",
	"cat <<EOF\n$\\\n(rm -rf x)\nEOF",
	"cat <<EOF\nhi \\\nEOF\nrm -rf x\nEOF\n",
	"cat <<E\\\nOF\nx\nEOF\nrm -rf x\nEOF\n",
	"cat <<EOF\n\\$(rm x)\nEOF",
	"cat <<EOF\nEOF \nrm x\nEOF",
	"alias ls='rm -rf x'\nls",
	"git status\r\nrm x",
	"git\tstatus;\trm x",
	"a=(b c); rm x",
	"function f { rm x; }; f",
	"git status; exit; rm x",
	"set -e; false; rm x",
	". ./x; rm y",
	"echo rm x | sh",
	"coproc rm x",
	"git status & disown; rm x",
	"select a in b; do rm x; done",
	"((1)); rm x",
	"let a=1; rm x",
	"declare -x A=1; rm x",
	"printf -v v '%s' rm; $v x",
	"echo ${X:-$(rm x)}",
	"git status ;; rm x",
	"git status;\n;rm x",
	"'rm' -rf x",
	"r''m -rf x",
	"\\rm -rf x",
	"git status ${IFS}rm x",
}

// shellsToRun returns the shells of the differential test: dash and bash,
// and /bin/sh if it is another program; it skips the test where commands
// cannot be sandboxed (a fuzzed line may do anything) or a shell is
// missing.
func shellsToRun(t testing.TB) []string {
	if _, err := sandbox.Supported(); err != nil {
		t.Skipf("lines cannot be run in a sandbox here: %v", err)
	}
	var shells []string
	for _, name := range []string{"dash", "bash", "/bin/sh"} {
		p, err := exec.LookPath(name)
		if err != nil {
			t.Skipf("%s is not installed", name)
		}
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(shells, real) {
			shells = append(shells, real)
		}
	}
	return shells
}

// nameRE finds the names a line could spell once its quotes, backslashes
// and line continuations are gone.
var nameRE = regexp.MustCompile(`[A-Za-z0-9_.+-]+`)

// stubNames are the commands a line could run by name: every name it
// spells, with and without its quotes and backslashes, and a few more.
func stubNames(line string) []string {
	joined := strings.NewReplacer("\\\n", "", "\\", "", "'", "", `"`, "").Replace(line)
	names := []string{"git", "rm", "id", "ls", "cat", "sh", "bash", "dash", "EOF", "x", "y"}
	for _, s := range []string{line, joined} {
		for _, n := range nameRE.FindAllString(s, -1) {
			if n != "." && n != ".." && len(n) < 64 && !slices.Contains(names, n) && len(names) < 400 {
				names = append(names, n)
			}
		}
	}
	return names
}

// shellRun runs line with each of shells (-c), one after the other in
// one sandbox, each in a working directory and with stubs of its own, and
// returns, for each shell, the commands it ran by name (each as its
// words, the name without its folder) and the names of the files it left
// in its working directory.
func shellRun(t testing.TB, shells []string, line string) (ran [][][]string, files [][]string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "cmdline-shell-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	dash, err := exec.LookPath("dash")
	if err != nil {
		t.Fatal(err)
	}
	// The driver runs each shell in a subshell: a line that ends its
	// shell does not end the others' turn.
	argv := []string{dash, "-c", `l=$1; shift
while [ "$#" -gt 0 ]; do
	(cd "$3" && export PATH="$2" HOME="$3" && exec "$1" -c "$l") </dev/null >/dev/null 2>&1
	shift 3
done`, "driver", line}
	var bins, logs, works []string
	for i, shell := range shells {
		bin, work, log := filepath.Join(dir, "bin"+strconv.Itoa(i)), filepath.Join(dir, "work"+strconv.Itoa(i)), filepath.Join(dir, "log"+strconv.Itoa(i))
		for _, d := range []string{bin, work, log} {
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		record := "#!" + dash + "\nprintf '%s\\0' \"${0##*/}\" \"$@\" > " + log + "/$$\n"
		for _, n := range stubNames(line) {
			stub := record + "exit 0\n"
			if n == "sh" || n == "bash" || n == "dash" {
				stub = record + "exec " + shell + " \"$@\"\n"
			}
			if err := os.WriteFile(filepath.Join(bin, n), []byte(stub), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		argv = append(argv, shell, bin, work)
		bins, logs, works = append(bins, bin), append(logs, log), append(works, work)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := sandbox.Run(ctx, &sandbox.Spec{
		Command:            argv,
		Dir:                dir,
		ReadOnly:           bins,
		ReadWrite:          append(slices.Clone(logs), works...),
		Env:                []string{"PATH=/nonexistent", "LC_ALL=C"},
		Limits:             sandbox.Limits{CPUTime: 5 * time.Second, AddressSpace: 1 << 30, FileSize: 1 << 20, Processes: 64},
		Timeout:            5 * time.Second,
		Grace:              100 * time.Millisecond,
		MaxOutput:          1 << 10,
		RequireConfinement: true,
	}); err != nil {
		t.Fatalf("running %q: %v", line, err)
	}
	for i := range shells {
		var r [][]string
		entries, err := os.ReadDir(logs[i])
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			b, err := os.ReadFile(filepath.Join(logs[i], e.Name()))
			if err != nil || len(b) == 0 {
				continue // a stub stopped before it wrote
			}
			r = append(r, strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00"))
		}
		var f []string
		entries, _ = os.ReadDir(works[i])
		for _, e := range entries {
			f = append(f, e.Name())
		}
		ran, files = append(ran, r), append(files, f)
	}
	return ran, files
}

// checkAgainstShells fails if a shell runs a command Parse did not see:
// a command by a name Parse does not name (unless Parse holds a command of
// unknown name, which every deny rule matches, or one that reads a script
// from a file or its input, which deny rules do not see into: see
// docs/loop.md); and, for a line Parse finds transparent (one an allow
// rule may match), any command whose words Parse does not give exactly,
// or any file written.
func checkAgainstShells(t testing.TB, shells []string, line string) {
	t.Helper()
	pc, err := cmdline.Parse(line)
	if err != nil {
		return // matches every deny rule and no allow rule
	}
	names := map[string]bool{}
	seesAll := true
	for _, c := range pc.Commands {
		name := base(c[0])
		names[name] = true
		if name == "" || readsScript(c) {
			seesAll = false
		}
	}
	ran, files := shellRun(t, shells, line)
	for i, sh := range shells {
		for _, r := range ran[i] {
			if seesAll && !names[r[0]] {
				t.Errorf("%s ran %q for %q; Parse saw %q (opaque %q)", sh, r, line, pc.Commands, pc.Opaque)
			}
			if pc.Opaque == "" && !slices.ContainsFunc(pc.Commands, func(c []string) bool {
				return base(c[0]) == r[0] && slices.Equal(c[1:], r[1:])
			}) {
				t.Errorf("%s ran %q for %q, which Parse finds transparent with %q", sh, r, line, pc.Commands)
			}
		}
		if pc.Opaque == "" && len(files[i]) > 0 {
			t.Errorf("%s wrote %q for %q, which Parse finds transparent", sh, files[i], line)
		}
	}
}

func base(name string) string { return name[strings.LastIndexByte(name, '/')+1:] }

// readsScript reports whether c reads commands from a file or its input:
// ., source, a shell without -c, or a login or interactive shell.
func readsScript(c []string) bool {
	switch base(c[0]) {
	case ".", "source":
		return true
	case "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "busybox":
		// Without -c, or a login or interactive shell, which reads
		// its profile.
		return !slices.ContainsFunc(c[1:], func(a string) bool {
			return strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && strings.Contains(a, "c")
		}) || slices.ContainsFunc(c[1:], func(a string) bool {
			return a == "--login" || strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && strings.ContainsAny(a, "li")
		})
	}
	return false
}

func TestParseAgreesWithShells(t *testing.T) {
	shells := shellsToRun(t)
	for i, line := range shellCorpus {
		t.Run(strconv.Itoa(i), func(t *testing.T) { checkAgainstShells(t, shells, line) })
	}
}

// The attacks of issue 32, finding 1, through the permission policy and
// the shells: each line is allowed by run_command(git status:*) or gets
// past run_command(rm:*) only if no shell runs more than git status.
func TestShellReadingsAgainstRules(t *testing.T) {
	shells := shellsToRun(t)
	def := &loop.ToolDef{Name: "run_command", RequiresApproval: true, Access: loop.AccessExecute, Subject: cmdline.Subject("command")}
	allow := &loop.Permissions{Allow: []loop.Rule{{Tool: "run_command", Pattern: "git status:*"}}}
	deny := &loop.Permissions{Mode: loop.ModeBypass, Deny: []loop.Rule{{Tool: "run_command", Pattern: "rm:*"}}}
	for _, line := range []string{
		"git status &>/dev/null rm -f victim",
		"git status &>>/dev/null rm -f victim",
		"cat <<EOF\n$\\\n(rm -f victim)\nEOF",
		"git status <<EOF\nhi \\\nEOF\nrm -f victim\nEOF\n",
		"git status <<E\\\nOF\nx\nEOF\nrm -f victim\nEOF\n",
		"git status --short",
	} {
		args, _ := json.Marshal(map[string]string{"command": line})
		allowed := allow.Check(def, args).Behavior == loop.Allow
		passes := deny.Check(def, args).Behavior == loop.Allow
		runs, _ := shellRun(t, shells, line)
		for i, sh := range shells {
			ran := runs[i]
			onlyGit := !slices.ContainsFunc(ran, func(r []string) bool { return !slices.Equal(r[:min(2, len(r))], []string{"git", "status"}) })
			if allowed && !onlyGit {
				t.Errorf("run_command(git status:*) allows %q, which %s runs as %q", line, sh, ran)
			}
			ranRm := slices.ContainsFunc(ran, func(r []string) bool { return r[0] == "rm" })
			if passes && ranRm {
				t.Errorf("run_command(rm:*) does not deny %q, which %s runs as %q", line, sh, ran)
			}
		}
	}
}

// FuzzParseAgainstShells runs fuzzed lines through Parse and the shells
// (see checkAgainstShells): the shells are the oracle.
//
//	go test -run '^$' -fuzz FuzzParseAgainstShells -fuzztime 5000x -parallel 1 ./loop/cmdline/
//
// (A count, not a duration: a line may take seconds, and a duration can
// end with a bare "context deadline exceeded" from the fuzzing
// coordinator, go.dev/issue/75804, which is no finding.)
func FuzzParseAgainstShells(f *testing.F) {
	for _, line := range shellCorpus {
		f.Add(line)
	}
	f.Fuzz(func(t *testing.T, line string) {
		if len(line) > 2048 || strings.ContainsRune(line, 0) {
			return // the kernel takes no NUL in an argument
		}
		checkAgainstShells(t, shellsToRun(t), line)
	})
}
