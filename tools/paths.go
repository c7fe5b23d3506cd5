package tools

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/hrns-dev/hrns/loop"
)

// confined resolves the paths the model gives against one directory, opened
// as an [os.Root] so that no path, `..` or symbolic link can leave it.
type confined struct {
	root *os.Root
	// bases are the absolute forms of the root's path (as given, and with
	// symbolic links resolved), used to accept absolute paths inside it.
	bases []string
}

func newConfined(root *os.Root) *confined {
	c := &confined{root: root}
	if abs, err := filepath.Abs(root.Name()); err == nil {
		c.bases = append(c.bases, abs)
		if real, err := filepath.EvalSymlinks(abs); err == nil && real != abs {
			c.bases = append(c.bases, real)
		}
	}
	return c
}

// rel turns the path the model gave into a clean path relative to the root.
// An empty path is the root itself. Absolute paths are accepted when they
// lie inside the root; `..` that climbs out of the root is refused here, and
// symbolic links that leave it are refused by the os.Root when the path is
// used.
func (c *confined) rel(p string) (string, error) {
	if p == "" {
		return ".", nil
	}
	if strings.ContainsRune(p, 0) {
		return "", fmt.Errorf("path %q contains a NUL byte", p)
	}
	if filepath.IsAbs(p) {
		clean := filepath.Clean(p)
		for _, base := range c.bases {
			if r, err := filepath.Rel(base, clean); err == nil && r != ".." && !strings.HasPrefix(r, ".."+string(filepath.Separator)) {
				return filepath.ToSlash(r), nil
			}
		}
		return "", &pathError{fmt.Sprintf("path %q is outside the working directory %s; use a path relative to it", p, c.display()), ErrOutside}
	}
	clean := filepath.Clean(p)
	if clean == ".." || strings.HasPrefix(clean, ".."+string(filepath.Separator)) {
		return "", &pathError{fmt.Sprintf("path %q is outside the working directory %s; use a path relative to it", p, c.display()), ErrOutside}
	}
	return filepath.ToSlash(clean), nil
}

func (c *confined) display() string {
	if len(c.bases) > 0 {
		return c.bases[0]
	}
	return c.root.Name()
}

// explain rewrites an error of the os.Root into a message the model can act
// on, naming the path as the model gave it.
func (c *confined) explain(p string, err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "path escapes from parent"):
		return &pathError{fmt.Sprintf("path %q leads outside the working directory %s (through `..`, a symbolic link that leaves it, or an absolute symbolic link); access refused", p, c.display()), ErrOutside}
	case errors.Is(err, fs.ErrNotExist):
		return &pathError{fmt.Sprintf("%s does not exist", p), err}
	case errors.Is(err, fs.ErrPermission):
		return &pathError{fmt.Sprintf("permission denied: %s", p), err}
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return &pathError{fmt.Sprintf("%s: %v", p, pe.Err), pe.Err}
	}
	return err
}

// Errors the file tools' errors match with errors.Is (their messages are
// written for the model).
var (
	// ErrOutside: the path leads outside the directory, by `..`, an
	// absolute path or a symbolic link.
	ErrOutside = errors.New("path leads outside the directory")
	// ErrNotRegular: the path names a directory, a FIFO, a device, a
	// socket: anything but a regular file.
	ErrNotRegular = errors.New("not a regular file")
	// ErrHardLinks: the regular file has more than one hard link, and
	// hard links are not allowed (see [FilesOptions.AllowHardLinks]).
	ErrHardLinks = errors.New("file has more than one hard link")
)

// pathError is an error of the file tools: a message written for the
// model, and the error it explains, which errors.Is and errors.As see.
type pathError struct {
	msg string
	err error
}

func (e *pathError) Error() string { return e.msg }
func (e *pathError) Unwrap() error { return e.err }

// throughLink refuses a write to rel (name as the model gave it) that
// symbolic links lead to a file that configures what programs run
// ([loop.ConfiguresPrograms]) under a name that does not: the permission
// policy, which judges the name, asks before such a file is written, and
// must see it named, links that lead to a file not there yet included.
func (c *confined) throughLink(name, rel string) error {
	if loop.ConfiguresPrograms(rel) || len(c.bases) == 0 {
		return nil
	}
	real := ""
	cur := filepath.Join(c.bases[0], filepath.FromSlash(rel))
	for range 40 { // as many links as the kernel follows
		fi, err := os.Lstat(cur)
		if err != nil {
			// Not there yet: where its folder leads.
			dir, err := filepath.EvalSymlinks(filepath.Dir(cur))
			if err != nil {
				return nil // the write fails on its own
			}
			real = filepath.Join(dir, filepath.Base(cur))
			break
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			if real, err = filepath.EvalSymlinks(cur); err != nil {
				return nil
			}
			break
		}
		target, err := os.Readlink(cur)
		if err != nil {
			return nil
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(cur), target)
		}
		cur = target
	}
	if real == "" {
		return nil // too many links: the write fails on its own
	}
	for _, base := range c.bases {
		if r, err := filepath.Rel(base, real); err == nil && r != ".." && !strings.HasPrefix(r, ".."+string(filepath.Separator)) {
			if loop.ConfiguresPrograms(filepath.ToSlash(r)) {
				return &pathError{fmt.Sprintf("%s leads through a symbolic link to %s, which configures what programs run here; write it by that name", name, filepath.ToSlash(r)), ErrNotRegular}
			}
			return nil
		}
	}
	return nil
}
