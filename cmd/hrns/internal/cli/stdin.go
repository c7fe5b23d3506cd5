package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"
)

// maxStdin bounds what hrns run reads from a pipe or a file on stdin.
const maxStdin = 1 << 20

// readStdin takes what is piped to hrns run: with "-" as the prompt, the
// prompt itself; otherwise context after the prompt (git diff | hrns run
// "review this"), or the prompt when none was given. A terminal, and
// /dev/null, are not read.
func (o *runOptions) readStdin(stdio *IO) error {
	fromStdin := o.prompt == "-"
	if !stdinPiped(stdio) {
		if fromStdin {
			return usagef("hrns run - reads the prompt from stdin, and nothing is piped to it: echo \"...\" | hrns run -")
		}
		return nil
	}
	data, err := io.ReadAll(io.LimitReader(stdio.In, maxStdin+1))
	if err != nil {
		return usagef("reading stdin: %v", err)
	}
	if len(data) > maxStdin {
		return usagef("stdin holds more than %d MiB: pass a smaller part, or let the model read the file with its tools", maxStdin>>20)
	}
	if !utf8.Valid(data) {
		return usagef("stdin is not UTF-8 text (%d bytes): pass text, or let the model read the file with its tools", len(data))
	}
	text := strings.TrimRight(string(data), "\n")
	if fromStdin && strings.TrimSpace(text) == "" {
		return usagef("hrns run - reads the prompt from stdin, and nothing is piped to it: echo \"...\" | hrns run -")
	}
	switch {
	case fromStdin || strings.TrimSpace(o.prompt) == "":
		o.prompt = text
	case strings.TrimSpace(text) != "":
		o.prompt += "\n\nThe input piped to this command (stdin):\n<stdin>\n" + text + "\n</stdin>"
		o.stdinBytes = len(data)
	}
	return nil
}

// stdinPiped reports whether stdin is a pipe or a file, to read: not a
// terminal, not a character device such as /dev/null.
func stdinPiped(stdio *IO) bool {
	if stdio.In == nil || stdio.interactive() {
		return false
	}
	f, ok := stdio.In.(*os.File)
	if !ok {
		return true // a reader given by a caller (tests)
	}
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	return fi.Mode()&os.ModeNamedPipe != 0 || fi.Mode().IsRegular() || fi.Mode()&os.ModeSocket != 0
}

// describeStdin says what was added to the prompt, for stderr.
func (o *runOptions) describeStdin(stdio *IO) {
	if o.stdinBytes > 0 && !o.json {
		fmt.Fprintf(stdio.Err, "(stdin: %d bytes added to the prompt)\n", o.stdinBytes)
	}
}
