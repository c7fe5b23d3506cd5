package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// rootStaging is where the command's root is assembled before it becomes
// the root. Any directory would do: the paths bound into it are opened
// first, so hiding the host's /tmp under the new file system does not
// matter; and the staged root is unbindable while the paths are bound,
// so that the bind of a granted /tmp (which the staged root is mounted
// on) does not bring the staged root along in place of the host's /tmp.
const rootStaging = "/tmp"

// A rootBind is one path of the command's root.
type rootBind struct {
	path string // as granted
	real string // with symbolic links resolved: where it is bound
	rw   bool
	fd   int // an O_PATH descriptor of real, opened before staging
	dir  bool
	// dev: a device node (/dev/null...), the host's own inode.
	dev bool
}

// buildRoot makes the command's root, in the first stage, in new PID and
// mount namespaces, before capabilities are dropped: a read-only tmpfs that
// holds only the paths the command may access, each bound at its own path
// (the read-only ones read-only), and a /proc of the command's PID
// namespace. Nothing else of the host's file system is reachable: not its
// files, not its pathname Unix sockets, not the /proc entries of its other
// processes.
func buildRoot(cfg *helperConfig) (err error) {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making the mounts private: %w", err)
	}
	// The /proc of this PID namespace is mounted first, while the host's
	// is fully visible (a user namespace may mount one only then); the
	// binds below go through its /proc/self/fd.
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mounting /proc: %w", err)
	}
	var binds []rootBind
	defer func() {
		for _, b := range binds {
			unix.Close(b.fd)
		}
	}()
	regions := writableRegions(cfg.Writable)
	add := func(p string, rw bool) error {
		if p == "/proc" || strings.HasPrefix(p, "/proc/") {
			return nil // this namespace's own
		}
		// Opened first, the path bound is the file opened; no link
		// is followed below a writable path (see openGrant), so that
		// what a command left there cannot widen the grant.
		fd, real, _, err := openGrant(p, regions)
		if err != nil {
			if errors.Is(err, ErrLinkBelowWritable) {
				return grantError(grantKind(p, cfg.Dir, rw), p, err)
			}
			if !rw || strings.HasPrefix(p, "/dev/") {
				return nil // a system path this machine lacks
			}
			return &os.PathError{Op: "stat", Path: p, Err: err}
		}
		var st unix.Stat_t
		err = unix.Fstat(fd, &st)
		if err == nil && real == "/" {
			err = errors.New("the whole file system is granted")
		}
		if err != nil {
			unix.Close(fd)
			return err
		}
		typ := st.Mode & unix.S_IFMT
		binds = append(binds, rootBind{path: p, real: real, rw: rw, fd: fd, dir: typ == unix.S_IFDIR, dev: typ == unix.S_IFCHR || typ == unix.S_IFBLK})
		return nil
	}
	for _, p := range cfg.ReadOnly {
		if err := add(p, false); err != nil {
			return err
		}
	}
	for _, p := range cfg.ReadWrite {
		if err := add(p, true); err != nil {
			return err
		}
	}
	// Parents before children: a path inside another is bound on top of
	// it, unless the outer bind already gives as much.
	slices.SortStableFunc(binds, func(a, b rootBind) int { return strings.Compare(a.real, b.real) })

	if err := unix.Mount("tmpfs", rootStaging, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755"); err != nil {
		return fmt.Errorf("mounting the root's tmpfs: %w", err)
	}
	// Unbindable while the paths are bound: a recursive bind copies the
	// mounts on and below its source but an unbindable one, and the
	// staged root is mounted on /tmp (a granted /tmp, or a parent of the
	// working directory such as /tmp, would otherwise be bound as the
	// staged root itself, and its paths below could not be made).
	if err := unix.Mount("", rootStaging, "", unix.MS_UNBINDABLE, ""); err != nil {
		return fmt.Errorf("making the root's tmpfs unbindable: %w", err)
	}
	// A private /tmp before the binds, so that granted paths inside /tmp
	// are bound on top of it.
	if cfg.PrivateTmp {
		if err := mountPoint(rootStaging+"/tmp", true); err != nil {
			return fmt.Errorf("making the mount point of /tmp: %w", err)
		}
		if err := unix.Mount("tmpfs", rootStaging+"/tmp", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777,size=256m"); err != nil {
			return fmt.Errorf("mounting a private /tmp: %w", err)
		}
	}
	// With mount_setattr(2) (Linux 5.12), a bind and every mount below
	// it take a flag in one call, without reading the mount table.
	// Without it: the mounts of this namespace before the first bind: a
	// bound directory with none of them below it brings no submount
	// along, so its bind is the one mount at its target (the binds
	// before it are of its parents, not below it either).
	setattr := !cfg.NoSetattr && canSetattr()
	var before []string
	if !setattr {
		if before, err = mountPoints(); err != nil {
			return err
		}
	}
	below := func(dir string) bool {
		return slices.ContainsFunc(before, func(mp string) bool { return mp != dir && within(mp, dir) })
	}
	var done []rootBind
	for _, b := range binds {
		if slices.ContainsFunc(done, func(d rootBind) bool { return within(b.real, d.real) && (d.rw || !b.rw) }) {
			continue
		}
		target := rootStaging + b.real
		if err := mountPoint(target, b.dir); err != nil {
			return fmt.Errorf("making the mount point of %s: %w", b.real, err)
		}
		if err := unix.Mount(fmt.Sprintf("/proc/self/fd/%d", b.fd), target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("binding %s: %w", b.real, err)
		}
		// What the command writes executes without its set-ID bits in
		// the sandbox; the rest is read-only.
		what, flags := "read-only", uintptr(unix.MS_RDONLY)
		switch {
		case b.dev:
			// A device is read and written through a read-only
			// mount all the same; read-only, the host's node keeps
			// its mode, owner and times, which Landlock does not
			// govern (root owns it: a chmod 000 /dev/null would
			// break the host's other users).
			what, flags = "read-only", unix.MS_RDONLY|unix.MS_NOSUID
		case b.rw:
			what, flags = "nosuid", unix.MS_NOSUID
		}
		// A file has no mounts below it, nor a directory without any
		// below it before: its bind is the one mount at target,
		// remounted without reading the mount table again (most binds:
		// /dev's devices, /etc's files, the work folder).
		remountBind := remountTree
		if !setattr {
			remountBind = remountTreeOld
			if !b.dir || !below(b.real) {
				remountBind = remount
			}
		}
		if err := remountBind(target, flags); err != nil {
			return fmt.Errorf("making %s %s: %w", b.real, what, err)
		}
		done = append(done, b)
	}
	// Private again, as the rest of the namespace: the command's root is
	// not special to what runs in it.
	if err := unix.Mount("", rootStaging, "", unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making the root's tmpfs private: %w", err)
	}
	if err := mountOverlays(cfg); err != nil {
		return err
	}
	// A granted path reached through a symbolic link (/bin on a merged
	// /usr, /etc/resolv.conf into /run) is a link to where it was bound.
	for _, b := range binds {
		if b.path == b.real {
			continue
		}
		link := rootStaging + b.path
		if _, err := os.Lstat(link); err == nil {
			continue
		}
		if os.MkdirAll(filepath.Dir(link), 0o755) == nil {
			_ = os.Symlink(b.real, link)
		}
	}
	if cfg.Terminals {
		pts := rootStaging + "/dev/pts"
		if err := mountPoint(pts, true); err != nil {
			return fmt.Errorf("making the mount point of /dev/pts: %w", err)
		}
		if err := unix.Mount("devpts", pts, "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620,gid=5"); err != nil {
			return fmt.Errorf("mounting a devpts of its own: %w", err)
		}
		if err := os.Symlink("pts/ptmx", rootStaging+"/dev/ptmx"); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("linking /dev/ptmx: %w", err)
		}
	}
	if err := mountPoint(rootStaging+"/proc", true); err != nil {
		return err
	}
	if err := unix.Mount("/proc", rootStaging+"/proc", "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("binding /proc: %w", err)
	}
	// The kernel's settings in /proc stay read-only, whatever Landlock
	// offers: uid 0 may write most of /proc/sys without a capability.
	for _, p := range []string{"sys", "sysrq-trigger", "irq", "bus", "fs"} {
		target := rootStaging + "/proc/" + p
		if _, err := os.Lstat(target); err != nil {
			continue
		}
		if err := unix.Mount(target, target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("binding /proc/%s: %w", p, err)
		}
		remountTreeRO := remountTreeReadOnly
		if !setattr {
			remountTreeRO = func(p string) error { return remountTreeOld(p, unix.MS_RDONLY) }
		}
		if err := remountTreeRO(target); err != nil {
			return fmt.Errorf("making /proc/%s read-only: %w", p, err)
		}
	}

	if err := os.Chdir(rootStaging); err != nil {
		return err
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	// The old root is stacked on the new one: detach it.
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detaching the host's root: %w", err)
	}
	if err := remountReadOnly("/"); err != nil {
		return fmt.Errorf("making the root read-only: %w", err)
	}
	return os.Chdir(cfg.Dir)
}

// within reports whether p is dir or inside it.
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

// mountPoint makes a directory, or an empty file, to mount on; one that
// exists (inside a bind made before) is used as it is.
func mountPoint(p string, dir bool) error {
	// Made at once, most often: the staged root is an empty tmpfs whose
	// directories the binds before made. An existing one (EEXIST) is
	// used as it is, as is one that exists whatever the error.
	err := makeMountPoint(p, dir)
	if err == nil {
		return nil
	}
	if _, lerr := os.Lstat(p); lerr == nil {
		return nil
	}
	if !errors.Is(err, unix.ENOENT) {
		return &os.PathError{Op: "mkdir", Path: p, Err: err}
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	if err := makeMountPoint(p, dir); err != nil && !errors.Is(err, unix.EEXIST) {
		return &os.PathError{Op: "mkdir", Path: p, Err: err}
	}
	return nil
}

// makeMountPoint makes the directory or empty file p, whose parent
// exists.
func makeMountPoint(p string, dir bool) error {
	if dir {
		return unix.Mkdir(p, 0o755)
	}
	fd, err := unix.Open(p, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return err
	}
	return unix.Close(fd)
}

// remountTreeReadOnly makes the mount at p, and every mount below it,
// read-only: a recursive bind brings the submounts along writable.
func remountTreeReadOnly(p string) error { return remountTree(p, unix.MS_RDONLY) }

// remountTree adds flags (MS_RDONLY, MS_NOSUID, MS_NODEV) to the mount at
// p and every mount below it, keeping those each has: with one call of
// mount_setattr(2) where the kernel has it, else by reading the mount
// table and remounting each.
func remountTree(p string, flags uintptr) error {
	if setattrTree(p, flags) == nil {
		return nil
	}
	return remountTreeOld(p, flags)
}

// remountTreeOld is remountTree without mount_setattr(2): it reads the
// mount table and remounts each mount of the tree.
func remountTreeOld(p string, flags uintptr) error {
	all, err := mountPoints()
	if err != nil {
		return err
	}
	points := []string{p}
	for _, mp := range all {
		if mp != p && within(mp, p) {
			points = append(points, mp)
		}
	}
	for _, mp := range points {
		if err := remount(mp, flags); err != nil {
			return fmt.Errorf("%s: %w", mp, err)
		}
	}
	return nil
}

// setattrTree adds flags (MS_RDONLY, MS_NOSUID, MS_NODEV) to the mount at
// p and every mount below it, at once, with mount_setattr(2). It fails on
// a kernel before 5.12, and changes nothing when it fails.
func setattrTree(p string, flags uintptr) error {
	var attr unix.MountAttr
	for _, f := range []struct {
		ms   uintptr
		attr uint64
	}{
		{unix.MS_RDONLY, unix.MOUNT_ATTR_RDONLY},
		{unix.MS_NOSUID, unix.MOUNT_ATTR_NOSUID},
		{unix.MS_NODEV, unix.MOUNT_ATTR_NODEV},
	} {
		if flags&f.ms != 0 {
			attr.Attr_set |= f.attr
			flags &^= f.ms
		}
	}
	if flags != 0 {
		return fmt.Errorf("mount_setattr: unsupported flags %#x", flags)
	}
	return unix.MountSetattr(unix.AT_FDCWD, p, unix.AT_RECURSIVE|unix.AT_SYMLINK_NOFOLLOW, &attr)
}

// canSetattr reports whether the kernel has mount_setattr(2): a call that
// changes nothing answers ENOSYS without it.
func canSetattr() bool {
	return unix.MountSetattr(unix.AT_FDCWD, "/", 0, &unix.MountAttr{}) == nil
}

// mountPoints returns the mount points of this process's mount namespace,
// from /proc/self/mountinfo.
func mountPoints() ([]string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var points []string
	for _, line := range strings.Split(string(b), "\n") {
		// id parent major:minor root mount-point options...
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		points = append(points, unescapeMountinfo(f[4]))
	}
	return points, nil
}

// unescapeMountinfo undoes the octal escapes (\040 for a space...) of a
// path in /proc/self/mountinfo.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, "\\") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var c byte
			ok := true
			for _, d := range s[i+1 : i+4] {
				if d < '0' || d > '7' {
					ok = false
					break
				}
				c = c*8 + byte(d-'0')
			}
			if ok {
				b.WriteByte(c)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// remountReadOnly makes the mount at p read-only, keeping the flags that a
// user namespace may not clear.
func remountReadOnly(p string) error { return remount(p, unix.MS_RDONLY) }

// remount adds flags to the mount at p, keeping those it has (a user
// namespace may not clear them).
func remount(p string, add uintptr) error {
	var st unix.Statfs_t
	if err := unix.Statfs(p, &st); err != nil {
		return err
	}
	flags := unix.MS_BIND | unix.MS_REMOUNT | add
	for _, f := range []struct{ st, ms int64 }{
		{unix.ST_RDONLY, unix.MS_RDONLY},
		{unix.ST_NOSUID, unix.MS_NOSUID},
		{unix.ST_NODEV, unix.MS_NODEV},
		{unix.ST_NOEXEC, unix.MS_NOEXEC},
		{unix.ST_NOATIME, unix.MS_NOATIME},
		{unix.ST_NODIRATIME, unix.MS_NODIRATIME},
		{unix.ST_RELATIME, unix.MS_RELATIME},
	} {
		if st.Flags&f.st != 0 {
			flags |= uintptr(f.ms)
		}
	}
	return unix.Mount("", p, "", flags, "")
}

// mountOverlays mounts the spec's overlays in the staged root, each over
// its Target, from the binds of its Lower (read-only), Upper and Work. An
// overlay the kernel refuses is left out, with a note: its Target stays
// the plain directory it is, which only costs the command the shared
// files.
func mountOverlays(cfg *helperConfig) error { return mountOverlaysAt(cfg, rootStaging) }

// mountOverlaysAt is mountOverlays in the root at root: the staged one,
// or, in a zygote, the command's root itself ("/").
func mountOverlaysAt(cfg *helperConfig, root string) error {
	if len(cfg.Overlays) == 0 {
		return nil
	}
	staging, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening the staged root: %w", err)
	}
	defer unix.Close(staging)
	for _, o := range cfg.Overlays {
		// Each of the four is the bind of its real path (resolved by
		// the caller), opened in the staged root without following any
		// link and named by its descriptor: a link another run's
		// command put there since cannot lead the mount, or its lower
		// layer, to a host path.
		var fds []int
		var names [4]string
		for i, p := range []string{o.Lower, o.Upper, o.Work, o.Target} {
			fd, err := openDirNoLinks(staging, p)
			if err != nil {
				for _, fd := range fds {
					unix.Close(fd)
				}
				return grantError("overlay path", p, fmt.Errorf("%w: %w", ErrLinkBelowWritable, err))
			}
			fds = append(fds, fd)
			names[i] = "/proc/self/fd/" + strconv.Itoa(fd)
		}
		opts := "lowerdir=" + names[0] + ",upperdir=" + names[1] + ",workdir=" + names[2]
		flags := uintptr(unix.MS_NOSUID | unix.MS_NODEV)
		err := unix.Mount("overlay", names[3], "overlay", flags, opts)
		if err != nil {
			// An unprivileged mount (in a user namespace) keeps the
			// overlay's own attributes under user.* instead.
			err = unix.Mount("overlay", names[3], "overlay", flags, opts+",userxattr")
		}
		for _, fd := range fds {
			unix.Close(fd)
		}
		if err != nil {
			cfg.OverlayNotes = append(cfg.OverlayNotes, fmt.Sprintf("the overlay on %s was not mounted: %v", o.Target, err))
			continue
		}
		cfg.OverlaysMounted++
	}
	return nil
}

// openDirNoLinks opens the directory p (absolute) below dirfd with
// O_PATH, following no link and no "..".
func openDirNoLinks(dirfd int, p string) (int, error) {
	fd, err := unix.Openat2(dirfd, strings.TrimPrefix(p, "/"), &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if errors.Is(err, unix.ENOSYS) {
		// Before Linux 5.6: a component at a time.
		fd, err = openBeneath(dirfd, p)
	}
	return fd, err
}

// openBeneath opens p (absolute) below the directory dirfd with O_PATH, a
// component at a time, following no link and no "..".
func openBeneath(dirfd int, p string) (int, error) {
	fd, err := unix.Openat(dirfd, ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	for _, c := range strings.Split(strings.Trim(p, "/"), "/") {
		if c == "" || c == "." {
			continue
		}
		if c == ".." {
			unix.Close(fd)
			return -1, unix.EXDEV
		}
		next, err := unix.Openat(fd, c, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			return -1, err
		}
		var st unix.Stat_t
		if err := unix.Fstat(next, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
			unix.Close(next)
			if err == nil {
				err = unix.ENOTDIR // a link, or not a directory
			}
			return -1, err
		}
		fd = next
	}
	return fd, nil
}
