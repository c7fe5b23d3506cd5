package sandbox

import (
	"encoding/binary"
	"errors"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

// inodeClock reads the clock the kernel stamps inodes with: a file the
// command creates, writes or changes the mode of afterwards has a change
// time (ctime) at or after it, and no process can set a ctime back.
func inodeClock() unix.Timespec {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_REALTIME_COARSE, &ts) != nil {
		return unix.Timespec{} // every file counts as changed
	}
	return ts
}

// clearSetID clears the set-user-ID and set-group-ID bits of the regular
// files under dirs that changed at or after since: what a command that
// ran since then left there (as root, a set-user-ID-root shell, inert in
// the sandbox but live outside it). A file of several links loses its
// name here instead: its other names may be outside dirs (a system
// program hard-linked in, where the sandbox allowed the link), whose bits
// are not the command's to clear. It returns the paths it changed, in the
// order of a walk by filepath.WalkDir (each directory's entries sorted by
// name, depth first).
//
// It runs once every process of the command is gone, so nothing moves the
// files under it (but the commands of other runs sharing its paths);
// symbolic links are not followed below dirs, and a path of dirs is
// reached as openGrant reaches it: a link the operator's path goes
// through is followed, none below another of dirs. Below each
// of dirs, every file is reached from its directory's descriptor: one
// lookup a file (a stat by full path looked up every component again),
// and no path length limit (a file deeper than PATH_MAX was skipped).
func clearSetID(dirs []string, since unix.Timespec) []string {
	w := setIDWalk{since: since, buf: make([]byte, 32<<10)}
	regions := writableRegions(dirs)
	for _, dir := range dirs {
		// Reached as the command's root bound it (see openGrant): a
		// link the operator's path goes through is followed, none
		// below a writable path, where the command could have
		// replaced a directory by a link to the host's files.
		pfd, _, _, err := openGrant(dir, regions)
		if err != nil {
			continue
		}
		var st unix.Stat_t
		if unix.Fstat(pfd, &st) != nil {
			unix.Close(pfd)
			continue
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			// Cleared from its directory, reached the same way.
			if w.changedSetID(&st) {
				if dfd, _, _, err := openGrant(filepath.Dir(dir), regions); err == nil {
					if clearFile(dfd, filepath.Base(dir)) {
						w.cleared = append(w.cleared, dir)
					}
					unix.Close(dfd)
				}
			}
		case unix.S_IFDIR:
			fd, err := unix.Openat(pfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			if err == nil {
				if fd = w.dir(fd, dir, 0); fd >= 0 {
					unix.Close(fd)
				}
			}
			// else: an unreadable directory is skipped
		}
		unix.Close(pfd)
	}
	return w.cleared
}

// A setIDWalk is one run of clearSetID.
type setIDWalk struct {
	since   unix.Timespec
	buf     []byte // for getdents, reused: entries are copied out
	cleared []string
}

// changedSetID reports whether st is a regular file with a set-ID bit,
// changed at or after the walk's since.
func (w *setIDWalk) changedSetID(st *unix.Stat_t) bool {
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Mode&(unix.S_ISUID|unix.S_ISGID) == 0 {
		return false
	}
	return st.Ctim.Sec > w.since.Sec || st.Ctim.Sec == w.since.Sec && st.Ctim.Nsec >= w.since.Nsec
}

// maxHeldDirs bounds the directory descriptors the walk holds at once
// (one a level): below that depth, it closes each directory before it
// descends and opens it again from the subdirectory's "..", so that a
// tree a command made deep cannot take this process's descriptors.
var maxHeldDirs = 64

// dir walks the directory open at fd, whose path is path, depth levels
// below a path of clearSetID. It returns the descriptor of that directory
// to close, which below maxHeldDirs may be another than fd, or -1 if the
// directory could not be opened again (the rest of it is then skipped, as
// an unreadable directory).
func (w *setIDWalk) dir(fd int, path string, depth int) int {
	entries := w.readDir(fd)
	for _, e := range entries {
		typ := e.typ
		var st unix.Stat_t
		if typ == unix.DT_UNKNOWN || typ == unix.DT_REG {
			if unix.Fstatat(fd, e.name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
				continue
			}
			switch st.Mode & unix.S_IFMT {
			case unix.S_IFREG:
				typ = unix.DT_REG
			case unix.S_IFDIR:
				typ = unix.DT_DIR
			default:
				continue
			}
		}
		p := path + "/" + e.name
		if path == "/" {
			p = "/" + e.name
		}
		switch typ {
		case unix.DT_REG:
			if w.changedSetID(&st) && clearFile(fd, e.name) {
				w.cleared = append(w.cleared, p)
			}
		case unix.DT_DIR:
			sub, err := unix.Openat(fd, e.name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				continue // an unreadable directory is skipped
			}
			if depth < maxHeldDirs {
				if sub = w.dir(sub, p, depth+1); sub >= 0 {
					unix.Close(sub)
				}
				continue
			}
			// Deep: this directory is let go while its subdirectory
			// is walked, and found again as that one's parent: the
			// same (device and inode) since nothing moves the files
			// under the walk.
			var here unix.Stat_t
			if unix.Fstat(fd, &here) != nil {
				unix.Close(sub)
				return fd
			}
			unix.Close(fd)
			if sub = w.dir(sub, p, depth+1); sub < 0 {
				return -1
			}
			fd, err = unix.Openat(sub, "..", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			unix.Close(sub)
			var again unix.Stat_t
			if err != nil || unix.Fstat(fd, &again) != nil || again.Dev != here.Dev || again.Ino != here.Ino {
				if err == nil {
					unix.Close(fd)
				}
				return -1
			}
		}
	}
	return fd
}

// A dirEntry is a name in a directory and its type (DT_*) as the
// directory reports it (DT_UNKNOWN where the file system does not).
type dirEntry struct {
	name string
	typ  uint8
}

// readDir lists the directory open at fd, but . and .., sorted by name.
// A read that fails ends the list (as os.ReadDir: what was read is kept).
func (w *setIDWalk) readDir(fd int) []dirEntry {
	var entries []dirEntry
	for {
		n, err := unix.Getdents(fd, w.buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || n <= 0 {
			break
		}
		entries = parseDirents(w.buf[:n], entries)
	}
	slices.SortFunc(entries, func(a, b dirEntry) int {
		switch {
		case a.name < b.name:
			return -1
		case a.name > b.name:
			return 1
		}
		return 0
	})
	return entries
}

// parseDirents appends the entries of b, records of getdents64(2)
// (struct linux_dirent64: inode, offset, record length, type, and a name
// ended by NUL), to entries. A record that does not fit ends the parse.
func parseDirents(b []byte, entries []dirEntry) []dirEntry {
	const (
		reclenOff = unsafe.Offsetof(unix.Dirent{}.Reclen)
		typeOff   = unsafe.Offsetof(unix.Dirent{}.Type)
		nameOff   = unsafe.Offsetof(unix.Dirent{}.Name)
	)
	for len(b) > int(nameOff) {
		reclen := int(binary.NativeEndian.Uint16(b[reclenOff:]))
		if reclen <= int(nameOff) || reclen > len(b) {
			break
		}
		name := b[nameOff:reclen]
		if i := slices.Index(name, 0); i >= 0 {
			name = name[:i]
		}
		if s := string(name); s != "." && s != ".." && s != "" {
			entries = append(entries, dirEntry{name: s, typ: b[typeOff]})
		}
		b = b[reclen:]
	}
	return entries
}

// clearFile clears the set-ID bits of the regular file name in the
// directory open at dirfd (or AT_FDCWD), or removes that name if the file
// has other names, and reports whether it did.
func clearFile(dirfd int, name string) bool {
	fd, err := unix.Openat(dirfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Mode&(unix.S_ISUID|unix.S_ISGID) == 0 {
		return false
	}
	if st.Nlink > 1 {
		err := unix.Unlinkat(dirfd, name, 0)
		return err == nil || errors.Is(err, fs.ErrNotExist)
	}
	// Through the descriptor: the file checked is the file changed.
	return unix.Chmod("/proc/self/fd/"+strconv.Itoa(fd), st.Mode&0o777|st.Mode&unix.S_ISVTX) == nil
}
