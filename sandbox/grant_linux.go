package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// maxLinks bounds the symbolic links followed for one path, as the
// kernel's own (ELOOP past 40).
const maxLinks = 40

// openGrant opens the granted path p (absolute) with O_PATH and returns
// its descriptor and its real path (every link followed resolved).
//
// Symbolic links are followed only in directories outside the writable
// paths (writable: real paths, as writableRegions returns them): those
// are as the operator configured them, which no sandboxed command can
// change. In a directory at or below a writable path, every component is
// taken as it is, without following a link: a component that is a
// symbolic link, a "..", or a file that is not a directory where the path
// goes on, fails with an error wrapping ErrLinkBelowWritable. Each
// component is opened from its directory's descriptor, so what is
// returned is what was checked.
func openGrant(p string, writable []string) (fd int, real string, followed bool, err error) {
	p = filepath.Clean(p)
	if !filepath.IsAbs(p) {
		return -1, "", false, fmt.Errorf("%s: not an absolute path", p)
	}
	// Most paths hold no link at all: one call, whatever is writable.
	fd, err = unix.Openat2(unix.AT_FDCWD, p, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	switch {
	case err == nil:
		return fd, p, false, nil
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.EACCES):
		// No link met before the missing component: the walk would
		// fail there too.
		return -1, "", false, &os.PathError{Op: "open", Path: p, Err: err}
	}
	// ELOOP (a link on the way), ENOTDIR, or no openat2 (before 5.6):
	// component by component.
	return walkGrant(p, writable)
}

// walkGrant is openGrant a component at a time.
func walkGrant(p string, writable []string) (fd int, real string, followed bool, err error) {
	fd, err = unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, "", false, &os.PathError{Op: "open", Path: "/", Err: err}
	}
	fail := func(e error) (int, string, bool, error) {
		unix.Close(fd)
		return -1, "", followed, e
	}
	real, rest, links := "/", p, 0
	var st unix.Stat_t
	buf := make([]byte, unix.PathMax)
	for {
		rest = strings.TrimLeft(rest, "/")
		if rest == "" {
			return fd, real, followed, nil
		}
		var c string
		c, rest, _ = strings.Cut(rest, "/")
		if c == "." {
			continue
		}
		below := ""
		for _, w := range writable {
			if within(real, w) {
				below = w
				break
			}
		}
		next := filepath.Join(real, c)
		if c == ".." {
			if below != "" {
				return fail(fmt.Errorf("%w: \"..\" in %s, below the writable %s", ErrLinkBelowWritable, real, below))
			}
			if real == "/" {
				continue
			}
			next = filepath.Dir(real)
		}
		nfd, err := unix.Openat(fd, c, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			if below != "" && errors.Is(err, unix.ENOTDIR) {
				return fail(fmt.Errorf("%w: %s, below the writable %s, is not a directory", ErrLinkBelowWritable, real, below))
			}
			return fail(&os.PathError{Op: "open", Path: next, Err: err})
		}
		if err := unix.Fstat(nfd, &st); err != nil {
			unix.Close(nfd)
			return fail(&os.PathError{Op: "stat", Path: next, Err: err})
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			if below != "" {
				unix.Close(nfd)
				return fail(fmt.Errorf("%w: %s, below the writable %s, is a symbolic link (a command may have made it): grant where it leads by its own name", ErrLinkBelowWritable, next, below))
			}
			links++
			n, err := unix.Readlinkat(nfd, "", buf)
			unix.Close(nfd)
			if err == nil && n >= len(buf) {
				err = unix.ENAMETOOLONG
			}
			if err == nil && links > maxLinks {
				err = unix.ELOOP
			}
			if err != nil {
				return fail(&os.PathError{Op: "readlink", Path: next, Err: err})
			}
			followed = true
			target := string(buf[:n])
			if strings.HasPrefix(target, "/") {
				root, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
				if err != nil {
					return fail(&os.PathError{Op: "open", Path: "/", Err: err})
				}
				unix.Close(fd)
				fd, real = root, "/"
			}
			rest = target + "/" + rest
			continue
		}
		if below != "" && strings.TrimLeft(rest, "/") != "" && st.Mode&unix.S_IFMT != unix.S_IFDIR {
			unix.Close(nfd)
			return fail(fmt.Errorf("%w: %s, below the writable %s, is not a directory", ErrLinkBelowWritable, next, below))
		}
		unix.Close(fd)
		fd, real = nfd, next
	}
}

// writableRegions returns the real paths of the writable paths, each
// opened with openGrant against the real paths found so far, until they
// hold: a writable path inside another (by its real path, whatever links
// the operator's paths go through) is then reached without following a
// link below that one. A path that cannot be opened is left out (it is
// refused where it is granted).
func writableRegions(paths []string) []string {
	var regions []string
	for round := 0; round <= len(paths); round++ {
		changed, anyFollowed := false, false
		for _, p := range paths {
			fd, real, followed, err := openGrant(p, regions)
			if err != nil {
				continue
			}
			unix.Close(fd)
			anyFollowed = anyFollowed || followed
			if !slices.Contains(regions, real) {
				regions = append(regions, real)
				changed = true
			}
		}
		// A path reached without any link is where it is whatever
		// else is writable: the first round is the last.
		if !changed || !anyFollowed {
			break
		}
	}
	return regions
}

// grantKind names the grant of path p in a spec whose working directory
// is dir: the working directory, a read-write path (rw) or a read-only
// one.
func grantKind(p, dir string, rw bool) string {
	switch {
	case p == dir:
		return "working directory"
	case rw:
		return "read-write path"
	}
	return "read-only path"
}

// grantError names the grant that was refused.
func grantError(what, p string, err error) error {
	return fmt.Errorf("the %s %s is refused: %w", what, p, err)
}

// mkdirGrant makes the directory p (and its missing parents, mode 0700)
// as openGrant reaches it: each made from its parent's descriptor, no
// link followed below a writable path.
func mkdirGrant(p string, writable []string, depth int) error {
	fd, _, _, err := openGrant(p, writable)
	if err == nil {
		var st unix.Stat_t
		err = unix.Fstat(fd, &st)
		unix.Close(fd)
		if err == nil && st.Mode&unix.S_IFMT != unix.S_IFDIR {
			err = &os.PathError{Op: "mkdir", Path: p, Err: unix.ENOTDIR}
		}
		return err
	}
	parent := filepath.Dir(p)
	if !errors.Is(err, unix.ENOENT) || parent == p || depth > 256 {
		return err
	}
	if err := mkdirGrant(parent, writable, depth+1); err != nil {
		return err
	}
	pfd, _, _, err := openGrant(parent, writable)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	if err := unix.Mkdirat(pfd, filepath.Base(p), 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
		return &os.PathError{Op: "mkdir", Path: p, Err: err}
	}
	// Checked again: an existing name may be a link.
	fd, _, _, err = openGrant(p, writable)
	if err == nil {
		unix.Close(fd)
	}
	return err
}
