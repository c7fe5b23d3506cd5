//go:build linux

package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// TestRemountOverlaysLinkNotFollowed: a zygote unmounts each overlay, by
// its Target, before each command; the Target lies in a path the
// commands write, and a command in another zygote may at any time put a
// link on the way to it (after the caller checked the grants). The
// unmount must not follow it to another mount (here a tmpfs standing for
// /proc, a bind, the root). Run in a mount namespace of a thread's own.
func TestRemountOverlaysLinkNotFollowed(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: mounts")
	}
	d := t.TempDir()
	for _, p := range []string{"lower", "upper", "work", "home/target", "victim"} {
		if err := os.MkdirAll(filepath.Join(d, p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfg := &helperConfig{Overlays: []Overlay{{
		Lower: filepath.Join(d, "lower"), Upper: filepath.Join(d, "upper"),
		Work: filepath.Join(d, "work"), Target: filepath.Join(d, "home/target"),
	}}}
	victim := filepath.Join(d, "victim")
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with its namespace
		errc <- func() error {
			if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
				return err
			}
			if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
				return err
			}
			if err := mountOverlaysAt(cfg, "/"); err != nil || cfg.OverlaysMounted != 1 {
				t.Logf("overlay not mounted: %v %v", err, cfg.OverlayNotes)
				return errSkip
			}
			if err := unix.Mount("tmpfs", victim, "tmpfs", 0, "size=1m"); err != nil {
				return err
			}
			// The command's link: home renamed, home a link to a
			// directory whose "target" names the victim.
			if err := os.Rename(filepath.Join(d, "home"), filepath.Join(d, "home2")); err != nil {
				return err
			}
			if err := os.Mkdir(filepath.Join(d, "x"), 0o755); err != nil {
				return err
			}
			if err := os.Symlink(victim, filepath.Join(d, "x", "target")); err != nil {
				return err
			}
			if err := os.Symlink("x", filepath.Join(d, "home")); err != nil {
				return err
			}
			err := remountOverlaysAt(cfg, "/", 1)
			t.Logf("remounting through the link: %v", err)
			var st, parent unix.Stat_t
			if err := unix.Stat(victim, &st); err != nil {
				return err
			}
			if err := unix.Stat(d, &parent); err != nil {
				return err
			}
			if st.Dev == parent.Dev {
				return errUnmounted
			}
			return nil
		}()
	}()
	switch err := <-errc; err {
	case nil:
	case errSkip:
		t.Skip("no overlay here")
	default:
		t.Fatal(err)
	}
}

var (
	errSkip      = errors.New("skip")
	errUnmounted = errors.New("the unmount followed the link: the victim's mount is gone")
)
