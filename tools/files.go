package tools

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/hrns-dev/hrns/loop"
)

// FilesOptions configure the file tools of [Files] and [FilesIn]. A nil
// *FilesOptions, and the zero value of each field, mean the documented
// defaults.
type FilesOptions struct {
	// MaxReadBytes caps the text one read_file call returns, line numbers
	// included; a read cut there tells the model which offset reads on.
	// 0 means 50 KiB; smaller values than 4 KiB are raised to 4 KiB, so
	// that the longest line shown (2000 bytes) always fits.
	MaxReadBytes int
	// DefaultReadLines is how many lines read_file returns when the model
	// gives no limit. 0 means 2000.
	DefaultReadLines int
	// MaxListEntries caps the entries one list_files call returns; a
	// listing cut there says so. 0 means 1000.
	MaxListEntries int
	// MaxEditBytes is the largest file edit_file changes. 0 means 10 MiB.
	MaxEditBytes int64
	// SkipApproval lets write_file and edit_file run without asking the
	// agent's [loop.Approver]. By default both require approval.
	SkipApproval bool
	// AllowHardLinks lets the file tools read and write regular files
	// that have more than one hard link. By default they refuse them: a
	// hard link already in the directory may be the same file as one
	// outside it (a key, a configuration), which os.Root cannot see.
	// Set it when the directory is known to hold no such links, for
	// example a checkout that uses hard links to share objects.
	AllowHardLinks bool
}

func (o *FilesOptions) withDefaults() FilesOptions {
	var v FilesOptions
	if o != nil {
		v = *o
	}
	if v.MaxReadBytes <= 0 {
		v.MaxReadBytes = 50 << 10
	}
	v.MaxReadBytes = max(v.MaxReadBytes, 4<<10)
	if v.DefaultReadLines <= 0 {
		v.DefaultReadLines = 2000
	}
	if v.MaxListEntries <= 0 {
		v.MaxListEntries = 1000
	}
	if v.MaxEditBytes <= 0 {
		v.MaxEditBytes = 10 << 20
	}
	return v
}

// maxLineBytes cuts single lines longer than this in read_file output, so
// that one minified line does not fill the whole read.
const maxLineBytes = 2000

// maxWalk bounds the directory entries one list_files call visits.
const maxWalk = 200_000

// Files returns the file tools read_file, list_files, write_file and
// edit_file, confined to the directory dir.
//
// dir is opened once as an [os.Root], which stays open for the life of the
// program (a toolset has no Close); use [FilesIn] to own the root instead.
func Files(dir string, opts *FilesOptions) (*loop.Toolset, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("tools: opening the files root: %w", err)
	}
	return FilesIn(root, opts), nil
}

// FilesIn returns the file tools read_file, list_files, write_file and
// edit_file, confined to root. The caller keeps root open while the toolset
// is in use.
//
// Every path the model gives is relative to root; an absolute path is
// accepted when it lies inside root (compared with the absolute form of
// root.Name()). Paths that leave root, by `..`, by an absolute path, or
// through a symbolic link that points outside it (or is absolute), are
// refused with an error the model reads. Only regular files are read and
// written, judged on the opened file (opened non-blocking, so a FIFO
// cannot hold a call); a file with more than one hard link, which may be
// a file outside root, is refused unless opts.AllowHardLinks is set.
//
// read_file and list_files are Concurrent; write_file and edit_file require
// approval unless opts.SkipApproval is set.
func FilesIn(root *os.Root, opts *FilesOptions) *loop.Toolset {
	f := &fileTools{c: newConfined(root), o: opts.withDefaults()}
	return loop.MustToolset(f.readFile(), f.listFiles(), f.writeFile(), f.editFile())
}

// def returns the file tool of that name, or nil.
func (f *fileTools) def(name string) *loop.ToolDef {
	switch name {
	case "read_file":
		return f.readFile()
	case "list_files":
		return f.listFiles()
	case "write_file":
		return f.writeFile()
	case "edit_file":
		return f.editFile()
	}
	return nil
}

type fileTools struct {
	c *confined
	o FilesOptions
}

// read_file

type readFileArgs struct {
	Path   string `json:"path" jsonschema:"the file to read, relative to the working directory"`
	Offset int    `json:"offset,omitempty" jsonschema:"the first line to read, counting from 1 (default 1)"`
	Limit  int    `json:"limit,omitempty" jsonschema:"how many lines to read (the tool's description gives the default)"`
}

func (f *fileTools) readFile() *loop.ToolDef {
	desc := fmt.Sprintf("Reads a text file in the working directory. Each line of the output starts with its line number "+
		"and a tab (like `cat -n`); the numbers are not part of the file. Reads up to %d lines from offset "+
		"(the first line is 1), or limit lines; a read longer than %s is cut, and the output then says "+
		"which offset to read on from. Lines longer than %d bytes are cut. Binary files are refused.",
		f.o.DefaultReadLines, size(f.o.MaxReadBytes), maxLineBytes)
	def := loop.NewTool("read_file", desc, func(ctx context.Context, in readFileArgs) (string, error) {
		return f.read(in)
	})
	def.Concurrent = true
	def.Access, def.Subject = loop.AccessRead, pathSubject
	return def
}

func (f *fileTools) read(in readFileArgs) (string, error) {
	if in.Path == "" {
		return "", errors.New("path is required")
	}
	if in.Offset < 0 || in.Limit < 0 {
		return "", errors.New("offset and limit must not be negative")
	}
	offset, limit := max(in.Offset, 1), in.Limit
	if limit == 0 {
		limit = f.o.DefaultReadLines
	}
	rel, err := f.c.rel(in.Path)
	if err != nil {
		return "", err
	}
	file, info, err := f.open(in.Path, rel, os.O_RDONLY)
	if err != nil {
		return "", err
	}
	defer file.Close()
	br := bufio.NewReaderSize(file, 64<<10)
	head, err := br.Peek(sniffLen)
	if err != nil && err != io.EOF && err != bufio.ErrBufferFull {
		return "", f.c.explain(in.Path, err)
	}
	if len(head) == 0 {
		return fmt.Sprintf("(%s is empty)", in.Path), nil
	}
	if looksBinary(head, len(head) == sniffLen) {
		return "", fmt.Errorf("%s looks like a binary file (%d bytes; NUL bytes or invalid UTF-8 in its first 8 KiB); read_file only shows text", in.Path, info.Size())
	}

	var out strings.Builder
	var (
		lineNo    int  // the last line read
		first     int  // the first line shown
		last      int  // the last line shown
		cutBySize bool // stopped at MaxReadBytes
		complete  bool // read to the end of the file
	)
	for {
		if last > 0 && last-first+1 == limit {
			break
		}
		line, n, err := nextLine(br, maxLineBytes)
		if err == io.EOF {
			complete = true
			break
		}
		if err != nil {
			return "", f.c.explain(in.Path, err)
		}
		lineNo++
		if lineNo < offset {
			continue
		}
		entry := fmt.Sprintf("%6d\t%s", lineNo, line)
		if n > len(line) {
			entry += fmt.Sprintf(" [... line cut: %d bytes in all]", n)
		}
		entry += "\n"
		if out.Len()+len(entry) > f.o.MaxReadBytes {
			cutBySize = true // a line always fits in MaxReadBytes
			break
		}
		out.WriteString(entry)
		if first == 0 {
			first = lineNo
		}
		last = lineNo
	}
	if last == 0 {
		return "", fmt.Errorf("offset %d is past the end of %s, which has %d lines", offset, in.Path, lineNo)
	}
	if complete && first == 1 {
		return out.String(), nil // the whole file
	}
	// Say how much more there is.
	total := -1
	if complete {
		total = lineNo
	} else if info.Size() <= 64<<20 {
		if rest, err := countLines(br); err == nil {
			total = lineNo + rest
		}
	}
	of := ""
	if total >= 0 {
		of = fmt.Sprintf(" of %d", total)
	}
	switch {
	case cutBySize:
		fmt.Fprintf(&out, "\n[output cut at %d bytes: showing lines %d-%d%s; call read_file with offset=%d to read on]", f.o.MaxReadBytes, first, last, of, last+1)
	case last == total || complete:
		fmt.Fprintf(&out, "\n[showing lines %d-%d%s: the end of the file]", first, last, of)
	default:
		fmt.Fprintf(&out, "\n[showing lines %d-%d%s; call read_file with offset=%d to read on]", first, last, of, last+1)
	}
	return out.String(), nil
}

// beforeOpen, when set, runs between the look at a path and its opening
// (tests only: it swaps a FIFO in).
var beforeOpen func(rel string)

// open opens the regular file at rel (name is the path as the model gave
// it) with flag, and returns it with its information, read from the open
// handle.
//
// A directory, anything that is not a regular file (a FIFO, a device, a
// socket) and, unless AllowHardLinks is set, a file with more than one
// hard link are refused. The path is looked at first, so that a device is
// not opened at all; but what counts is the open file, since the path can
// change in between: it is opened non-blocking, so that a FIFO put there
// meanwhile is not waited on, and then checked.
func (f *fileTools) open(name, rel string, flag int) (*os.File, os.FileInfo, error) {
	info, err := f.c.root.Stat(rel)
	if err != nil && (flag&os.O_CREATE == 0 || !errors.Is(err, fs.ErrNotExist)) {
		return nil, nil, f.c.explain(name, err)
	}
	if err == nil {
		if err := f.usable(name, info); err != nil {
			return nil, nil, err
		}
	}
	if beforeOpen != nil {
		beforeOpen(rel)
	}
	file, err := f.c.root.OpenFile(rel, flag|openNonblock, 0o644)
	if err != nil {
		if isNoReader(err) {
			return nil, nil, &pathError{fmt.Sprintf("%s is not a regular file", name), ErrNotRegular}
		}
		return nil, nil, f.c.explain(name, err)
	}
	if info, err = file.Stat(); err != nil {
		file.Close()
		return nil, nil, f.c.explain(name, err)
	}
	if err := f.usable(name, info); err != nil {
		file.Close()
		return nil, nil, err
	}
	return file, info, nil
}

// usable refuses what the file tools do not read or write: a directory,
// anything that is not a regular file, and a file with other hard links.
func (f *fileTools) usable(name string, info os.FileInfo) error {
	if info.IsDir() {
		return &pathError{fmt.Sprintf("%s is a directory; use list_files to see what it holds", name), ErrNotRegular}
	}
	if !info.Mode().IsRegular() {
		return &pathError{fmt.Sprintf("%s is not a regular file", name), ErrNotRegular}
	}
	if n := linkCount(info); n > 1 && !f.o.AllowHardLinks {
		return &pathError{fmt.Sprintf("%s has %d hard links: it may be the same file as one outside the working directory, so the file tools refuse it (the operator can allow hard links with FilesOptions.AllowHardLinks)", name, n), ErrHardLinks}
	}
	return nil
}

// nextLine reads one line from br without its line ending. It keeps at most
// max bytes of the line (cut on a rune boundary) and returns the length of
// the whole line in n; it returns io.EOF after the last line.
func nextLine(br *bufio.Reader, max int) (line []byte, n int, err error) {
	ended := false
	for {
		chunk, err := br.ReadSlice('\n')
		n += len(chunk)
		if len(chunk) > 0 && chunk[len(chunk)-1] == '\n' {
			ended = true
			chunk = chunk[:len(chunk)-1]
			n--
		}
		if room := max - len(line); room > 0 {
			line = append(line, chunk[:min(room, len(chunk))]...)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == io.EOF {
			if n == 0 && !ended {
				return nil, 0, io.EOF
			}
			err = nil
		}
		if err != nil {
			return nil, n, err
		}
		break
	}
	if n <= max && len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
		n--
	}
	if n > len(line) {
		// The line was cut: end it on a whole rune.
		for i := len(line) - 1; i >= 0 && i >= len(line)-utf8.UTFMax; i-- {
			if utf8.RuneStart(line[i]) {
				if !utf8.FullRune(line[i:]) {
					line = line[:i]
				}
				break
			}
		}
	}
	return line, n, nil
}

// countLines counts the lines left in r: its newlines, plus one for a last
// line without one.
func countLines(r io.Reader) (int, error) {
	buf := make([]byte, 64<<10)
	count, last := 0, byte('\n')
	for {
		k, err := r.Read(buf)
		if k > 0 {
			for _, b := range buf[:k] {
				if b == '\n' {
					count++
				}
			}
			last = buf[k-1]
		}
		if err == io.EOF {
			if last != '\n' {
				count++
			}
			return count, nil
		}
		if err != nil {
			return 0, err
		}
	}
}

// cutString returns at most n bytes of s, ending on a whole rune.
func cutString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// list_files

type listFilesArgs struct {
	Path    string `json:"path,omitempty" jsonschema:"the directory to list, relative to the working directory (default: the working directory)"`
	Pattern string `json:"pattern,omitempty" jsonschema:"a glob matched against paths relative to path: * and ? match within one name, [a-z] a class, ** any number of directories (**/*.go finds Go files at any depth); default * (the directory's own entries)"`
}

func (f *fileTools) listFiles() *loop.ToolDef {
	desc := fmt.Sprintf("Lists files and directories in the working directory, sorted, one path per line. Paths are "+
		"relative to the working directory, so they can be given to read_file as they are; directories end with "+
		"'/'. Without a pattern, lists the entries of path itself; with pattern, the entries under path that match "+
		"it (use ** to recurse, e.g. **/*.md). .git directories are skipped. At most %d entries are returned.",
		f.o.MaxListEntries)
	def := loop.NewTool("list_files", desc, func(ctx context.Context, in listFilesArgs) (string, error) {
		return f.list(ctx, in)
	})
	def.Concurrent = true
	def.Access, def.Subject = loop.AccessRead, pathSubject
	return def
}

func (f *fileTools) list(ctx context.Context, in listFilesArgs) (string, error) {
	rel, err := f.c.rel(in.Path)
	if err != nil {
		return "", err
	}
	shown := in.Path
	if shown == "" {
		shown = "."
	}
	pattern := strings.TrimPrefix(strings.TrimSpace(in.Pattern), "./")
	if pattern == "" {
		pattern = "*"
	}
	g, err := compileGlob(pattern)
	if err != nil {
		return "", err
	}
	info, err := f.c.root.Stat(rel)
	if err != nil {
		return "", f.c.explain(shown, err)
	}
	if !info.IsDir() {
		return "", fmt.Errorf("%s is a file, not a directory; use read_file to read it", shown)
	}
	fsys := f.c.root.FS()
	// The state of the pattern at each directory walked into, so that an
	// entry is matched from its parent's state in one step.
	states := map[string]globState{rel: g.start()}
	var entries []string
	visited, cut, walkCut := 0, false, false
	errStop := errors.New("stop")
	err = fs.WalkDir(fsys, rel, func(p string, d fs.DirEntry, err error) error {
		if p == rel {
			return err // the start: an error here is the walk's error
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			return ctxErr
		}
		visited++
		if visited > maxWalk {
			walkCut = true
			return errStop
		}
		if d.IsDir() && d.Name() == ".git" {
			return fs.SkipDir
		}
		if err != nil {
			return nil // an unreadable directory: list it, skip its contents
		}
		isDir := d.IsDir()
		if d.Type()&fs.ModeSymlink != 0 {
			// A link to a directory inside the root is marked as one,
			// but not followed.
			if st, err := f.c.root.Stat(p); err == nil && st.IsDir() {
				isDir = true
			}
		}
		parent, ok := states[path.Dir(p)]
		if !ok {
			return nil // not under a directory walked into (cannot happen)
		}
		st := g.step(parent, d.Name())
		if g.matched(st) {
			if len(entries) == f.o.MaxListEntries {
				cut = true
				return errStop
			}
			name := p
			if isDir {
				name += "/"
			}
			entries = append(entries, name)
		}
		if d.IsDir() {
			if !g.more(st) {
				return fs.SkipDir
			}
			states[p] = st
		}
		return nil
	})
	if listWork != nil {
		listWork(g.work)
	}
	if err != nil && err != errStop {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "", f.c.explain(shown, err)
	}
	if len(entries) == 0 {
		if in.Pattern == "" {
			return fmt.Sprintf("(%s is empty)", shown), nil
		}
		return fmt.Sprintf("(nothing in %s matches %q)", shown, in.Pattern), nil
	}
	out := strings.Join(entries, "\n")
	switch {
	case cut:
		out += fmt.Sprintf("\n[listing cut at %d entries; narrow the path or the pattern to see the rest]", f.o.MaxListEntries)
	case walkCut:
		out += fmt.Sprintf("\n[listing stopped after visiting %d entries; narrow the path or the pattern]", maxWalk)
	}
	return out, nil
}

// listWork, when set, is told the pattern matching work of each
// list_files call: the number of path.Match calls (tests only).
var listWork func(int)

// write_file

type writeFileArgs struct {
	Path    string `json:"path" jsonschema:"the file to write, relative to the working directory; missing parent directories are created"`
	Content string `json:"content" jsonschema:"the complete new content of the file"`
}

func (f *fileTools) writeFile() *loop.ToolDef {
	def := loop.NewTool("write_file",
		"Writes a file in the working directory: creates it, or replaces its whole content if it exists. "+
			"Missing parent directories are created. To change part of an existing file, prefer edit_file.",
		func(ctx context.Context, in writeFileArgs) (string, error) {
			return f.write(in)
		})
	def.RequiresApproval = !f.o.SkipApproval
	def.Access, def.Subject = loop.AccessEdit, pathSubject
	return def
}

func (f *fileTools) write(in writeFileArgs) (string, error) {
	if in.Path == "" {
		return "", errors.New("path is required")
	}
	rel, err := f.c.rel(in.Path)
	if err != nil {
		return "", err
	}
	if rel == "." {
		return "", fmt.Errorf("%s is the working directory itself, not a file", in.Path)
	}
	if err := f.c.throughLink(in.Path, rel); err != nil {
		return "", err
	}
	if dir := path.Dir(rel); dir != "." {
		if err := f.c.root.MkdirAll(dir, 0o755); err != nil {
			return "", f.c.explain(in.Path, err)
		}
	}
	verb := "created"
	if _, err := f.c.root.Lstat(rel); err == nil {
		verb = "overwrote"
	}
	// Truncate only once the open file is known to be a regular file with
	// one link: O_TRUNC would empty a hard-linked file before the check.
	w, _, err := f.open(in.Path, rel, os.O_WRONLY|os.O_CREATE)
	if err != nil {
		return "", err
	}
	if err := rewrite(w, in.Content); err != nil {
		return "", f.c.explain(in.Path, err)
	}
	return fmt.Sprintf("%s %s (%d bytes)", verb, in.Path, len(in.Content)), nil
}

// rewrite replaces the whole content of the open file w with content, and
// closes w.
func rewrite(w *os.File, content string) (err error) {
	defer func() { err = errors.Join(err, w.Close()) }()
	if err := w.Truncate(0); err != nil {
		return err
	}
	if _, err := w.Seek(0, io.SeekStart); err != nil {
		return err
	}
	_, err = io.WriteString(w, content)
	return err
}

// edit_file

type editFileArgs struct {
	Path       string `json:"path" jsonschema:"the file to edit, relative to the working directory"`
	OldString  string `json:"old_string" jsonschema:"the exact text to replace, including whitespace and indentation; it must occur exactly once unless replace_all is set"`
	NewString  string `json:"new_string" jsonschema:"the text to put in its place"`
	ReplaceAll bool   `json:"replace_all,omitempty" jsonschema:"replace every occurrence of old_string (default false)"`
}

func (f *fileTools) editFile() *loop.ToolDef {
	def := loop.NewTool("edit_file",
		"Edits a text file in the working directory by exact string replacement: old_string is replaced by "+
			"new_string. old_string must match the file exactly (read the file first) and occur exactly once; "+
			"include enough surrounding lines to make it unique, or set replace_all to replace every occurrence. "+
			"Reports how many replacements were made.",
		func(ctx context.Context, in editFileArgs) (string, error) {
			return f.edit(in)
		})
	def.RequiresApproval = !f.o.SkipApproval
	def.Access, def.Subject = loop.AccessEdit, pathSubject
	return def
}

func (f *fileTools) edit(in editFileArgs) (string, error) {
	if in.Path == "" {
		return "", errors.New("path is required")
	}
	if in.OldString == "" {
		return "", errors.New("old_string is empty; to create or replace a whole file use write_file")
	}
	if in.OldString == in.NewString {
		return "", errors.New("old_string and new_string are the same; nothing to change")
	}
	rel, err := f.c.rel(in.Path)
	if err != nil {
		return "", err
	}
	if err := f.c.throughLink(in.Path, rel); err != nil {
		return "", err
	}
	// Read and rewrite through one handle: the file changed is the file
	// checked and read.
	file, info, err := f.open(in.Path, rel, os.O_RDWR)
	if err != nil {
		return "", err
	}
	defer file.Close()
	if info.Size() > f.o.MaxEditBytes {
		return "", fmt.Errorf("%s is %d bytes, more than edit_file changes (%d); use run_command or write_file", in.Path, info.Size(), f.o.MaxEditBytes)
	}
	data, err := io.ReadAll(io.LimitReader(file, f.o.MaxEditBytes+1))
	if err != nil {
		return "", f.c.explain(in.Path, err)
	}
	if int64(len(data)) > f.o.MaxEditBytes {
		return "", fmt.Errorf("%s is more than %d bytes, more than edit_file changes; use run_command or write_file", in.Path, f.o.MaxEditBytes)
	}
	if looksBinary(data[:min(len(data), sniffLen)], len(data) > sniffLen) {
		return "", fmt.Errorf("%s looks like a binary file; edit_file only changes text", in.Path)
	}
	text := string(data)
	oldS, newS := in.OldString, in.NewString
	n := strings.Count(text, oldS)
	if n == 0 && strings.Contains(text, "\r\n") && strings.Contains(oldS, "\n") && !strings.Contains(oldS, "\r\n") {
		// The file has Windows line endings; the model wrote Unix ones.
		crlf := strings.ReplaceAll(oldS, "\n", "\r\n")
		if k := strings.Count(text, crlf); k > 0 {
			oldS, newS, n = crlf, strings.ReplaceAll(newS, "\n", "\r\n"), k
		}
	}
	switch {
	case n == 0:
		return "", fmt.Errorf("old_string was not found in %s; it must match the file exactly, including whitespace and indentation (read the file again to check)", in.Path)
	case n > 1 && !in.ReplaceAll:
		return "", fmt.Errorf("old_string occurs %d times in %s; include more surrounding text to make it unique, or set replace_all to replace all %d", n, in.Path, n)
	}
	if in.ReplaceAll {
		text = strings.ReplaceAll(text, oldS, newS)
	} else {
		text = strings.Replace(text, oldS, newS, 1)
	}
	// Rewrite in place, keeping the file's mode.
	if err := rewrite(file, text); err != nil {
		return "", f.c.explain(in.Path, err)
	}
	if n == 1 {
		return fmt.Sprintf("replaced 1 occurrence in %s", in.Path), nil
	}
	return fmt.Sprintf("replaced %d occurrences in %s", n, in.Path), nil
}

// pathSubject lets permission rules match the path of a file tool's call
// (write_file(src/**)).
var pathSubject = loop.Subject{Kind: loop.SubjectPath, Argument: "path"}
