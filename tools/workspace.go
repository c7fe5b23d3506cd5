package tools

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"
)

// Errors of a [Workspace] besides [ErrOutside], [ErrNotRegular],
// [ErrHardLinks] and fs.ErrNotExist, for errors.Is.
var (
	// ErrBadPath: the path is empty where a file is needed, absolute,
	// not valid UTF-8, holds a NUL byte, or is too long.
	ErrBadPath = errors.New("invalid path")
	// ErrNotDir: List was given something other than a directory.
	ErrNotDir = errors.New("not a directory")
	// ErrTooLarge: ReadFile was given a file larger than its limit.
	ErrTooLarge = errors.New("file too large")
)

// MaxWorkspaceListing bounds the entries [Workspace.List] reads from one
// directory.
const MaxWorkspaceListing = 100_000

// maxPathBytes bounds the paths a Workspace takes.
const maxPathBytes = 4096

// A Workspace gives a program (an API serving a session's files, not a
// model) the files of one directory, with the confinement of the file
// tools, whose code it runs: paths are relative to the directory; `..`
// that climbs out, absolute paths and symbolic links that leave it
// (also one swapped in while a call runs) are refused, by an [os.Root];
// only regular files are read and written, judged on the opened file,
// opened non-blocking so that a FIFO cannot hold a call; a file with
// more than one hard link is refused unless opts.AllowHardLinks is set.
//
// Its errors name paths as the caller gave them, never the directory's
// place on the host, and match the package's sentinel errors (ErrOutside,
// ErrNotRegular, ErrHardLinks, ErrBadPath, ErrNotDir, ErrTooLarge) or
// fs.ErrNotExist with errors.Is.
//
// The methods are safe for concurrent use.
type Workspace struct {
	f *fileTools
}

// OpenWorkspace opens the directory dir as a Workspace. Close it when
// done.
func OpenWorkspace(dir string, opts *FilesOptions) (*Workspace, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	return &Workspace{f: &fileTools{c: newConfined(root), o: opts.withDefaults()}}, nil
}

// Close closes the workspace's directory.
func (w *Workspace) Close() error { return w.f.c.root.Close() }

// A WorkspaceEntry is one entry of a directory of a [Workspace].
type WorkspaceEntry struct {
	// Name is the entry's name; Path its slash-separated path relative
	// to the workspace.
	Name, Path string
	// Size is its size in bytes (of the link itself for a symbolic
	// link), ModTime when it last changed.
	Size    int64
	ModTime time.Time
	// IsDir is true for a directory, and for a symbolic link to a
	// directory inside the workspace.
	IsDir bool
}

// rel checks p as a Workspace takes paths, and returns it relative to the
// directory ("." for the directory itself).
func (w *Workspace) rel(p string) (string, error) {
	switch {
	case len(p) > maxPathBytes:
		return "", fmt.Errorf("a path of %d bytes: %w (at most %d)", len(p), ErrBadPath, maxPathBytes)
	case !utf8.ValidString(p):
		return "", fmt.Errorf("path %q: %w: not UTF-8", p, ErrBadPath)
	case strings.ContainsRune(p, 0):
		return "", fmt.Errorf("path %q: %w: it holds a NUL byte", p, ErrBadPath)
	case strings.HasPrefix(p, "/") || strings.HasPrefix(p, `\`) || path.IsAbs(p) || len(p) > 1 && p[1] == ':':
		return "", fmt.Errorf("path %q: %w: absolute paths are refused; give a path relative to the workspace", p, ErrBadPath)
	}
	rel, err := w.f.c.rel(p)
	if err != nil {
		return "", w.explain(p, err)
	}
	return rel, nil
}

// explain turns an error of the file tools into one that names p as the
// caller gave it, keeping what errors.Is matches.
func (w *Workspace) explain(p string, err error) error {
	for _, target := range []error{ErrOutside, ErrNotRegular, ErrHardLinks, fs.ErrNotExist, fs.ErrPermission} {
		if errors.Is(err, target) {
			return fmt.Errorf("%s: %w", p, target)
		}
	}
	switch {
	case errors.Is(err, syscall.ENOTDIR), errors.Is(err, fs.ErrExist): // MkdirAll over a file
		return fmt.Errorf("%s: %w: a part of the path is a file", p, ErrNotDir)
	case errors.Is(err, syscall.EISDIR):
		return fmt.Errorf("%s: %w", p, ErrNotRegular)
	case errors.Is(err, syscall.ENAMETOOLONG), errors.Is(err, syscall.ELOOP):
		return fmt.Errorf("%s: %w: %v", p, ErrBadPath, err)
	}
	if pe, ok := errors.AsType[*fs.PathError](err); ok {
		return fmt.Errorf("%s: %w", p, pe.Err)
	}
	if pe, ok := errors.AsType[*pathError](err); ok && pe.err != nil {
		return fmt.Errorf("%s: %w", p, pe.err)
	}
	return fmt.Errorf("%s: %w", p, err)
}

// List returns the entries of the directory dir ("" or "." for the
// workspace itself), in the order the system gives them, skipping names
// that are not valid UTF-8 (no caller could name them back). It reads at
// most [MaxWorkspaceListing] entries; complete is false when there were
// more.
func (w *Workspace) List(ctx context.Context, dir string) (entries []WorkspaceEntry, complete bool, err error) {
	rel, err := w.rel(dir)
	if err != nil {
		return nil, false, err
	}
	root := w.f.c.root
	// Look first, so that a FIFO or a device is not opened at all; then
	// check the opened file, since the path may have changed meanwhile.
	info, err := root.Stat(rel)
	if err != nil {
		return nil, false, w.explain(dir, w.f.c.explain(dir, err))
	}
	if !info.IsDir() {
		return nil, false, fmt.Errorf("%s: %w", dir, ErrNotDir)
	}
	d, err := root.OpenFile(rel, os.O_RDONLY|openNonblock, 0)
	if err != nil {
		return nil, false, w.explain(dir, w.f.c.explain(dir, err))
	}
	defer d.Close()
	if info, err := d.Stat(); err != nil || !info.IsDir() {
		return nil, false, fmt.Errorf("%s: %w", dir, ErrNotDir)
	}
	prefix := ""
	if rel != "." {
		prefix = rel + "/"
	}
	for {
		if err := ctx.Err(); err != nil {
			return nil, false, err
		}
		batch, err := d.ReadDir(1024)
		for _, e := range batch {
			if len(entries) == MaxWorkspaceListing {
				return entries, false, nil
			}
			if !utf8.ValidString(e.Name()) {
				continue
			}
			info, ierr := e.Info()
			if ierr != nil {
				continue // removed meanwhile
			}
			isDir := e.IsDir()
			if e.Type()&fs.ModeSymlink != 0 {
				if st, err := root.Stat(prefix + e.Name()); err == nil && st.IsDir() {
					isDir = true // a link to a directory inside: marked, never followed out
				}
			}
			entries = append(entries, WorkspaceEntry{Name: e.Name(), Path: prefix + e.Name(), Size: info.Size(), ModTime: info.ModTime(), IsDir: isDir})
		}
		if err == io.EOF || err == nil && len(batch) == 0 {
			return entries, true, nil
		}
		if err != nil {
			return nil, false, w.explain(dir, err)
		}
	}
}

// ReadFile returns the content of the regular file name and its
// information, read from the opened file. A file larger than limit bytes
// is refused with ErrTooLarge.
func (w *Workspace) ReadFile(name string, limit int64) ([]byte, fs.FileInfo, error) {
	if name == "" {
		return nil, nil, fmt.Errorf("no path: %w", ErrBadPath)
	}
	rel, err := w.rel(name)
	if err != nil {
		return nil, nil, err
	}
	if rel == "." {
		return nil, nil, fmt.Errorf("%q is the workspace itself: %w", name, ErrNotRegular)
	}
	file, info, err := w.f.open(name, rel, os.O_RDONLY)
	if err != nil {
		return nil, nil, w.explain(name, err)
	}
	defer file.Close()
	if info.Size() > limit {
		return nil, nil, fmt.Errorf("%s is %d bytes: %w (at most %d)", name, info.Size(), ErrTooLarge, limit)
	}
	b, err := io.ReadAll(io.LimitReader(file, limit+1))
	if err != nil {
		return nil, nil, w.explain(name, err)
	}
	if int64(len(b)) > limit {
		return nil, nil, fmt.Errorf("%s grew past %d bytes while read: %w", name, limit, ErrTooLarge)
	}
	return b, info, nil
}

// WriteFile creates the regular file name, or replaces its whole content,
// with data; missing parent directories are created.
func (w *Workspace) WriteFile(name string, data []byte) error {
	if name == "" {
		return fmt.Errorf("no path: %w", ErrBadPath)
	}
	rel, err := w.rel(name)
	if err != nil {
		return err
	}
	if rel == "." {
		return fmt.Errorf("%q is the workspace itself: %w", name, ErrNotRegular)
	}
	if dir := path.Dir(rel); dir != "." {
		if err := w.f.c.root.MkdirAll(dir, 0o755); err != nil {
			return w.explain(name, w.f.c.explain(name, err))
		}
	}
	// Truncated only once the open file is known to be a regular file
	// with one link, as write_file does.
	file, _, err := w.f.open(name, rel, os.O_WRONLY|os.O_CREATE)
	if err != nil {
		return w.explain(name, err)
	}
	if err := rewrite(file, string(data)); err != nil {
		return w.explain(name, err)
	}
	return nil
}
