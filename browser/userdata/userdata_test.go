package userdata_test

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/hrns-dev/hrns/browser/userdata"
)

// zent is an entry of an archive a test builds.
type zent struct {
	name string
	body string
	mode fs.FileMode // 0: a regular file (a directory when name ends in /)
	size int         // a file of size zero bytes instead of body
	link string      // a tar link's target
	typ  byte        // a tar type flag, 0: from mode
}

func zipOf(t testing.TB, ents ...zent) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range ents {
		h := &zip.FileHeader{Name: e.name, Method: zip.Deflate}
		if e.mode != 0 {
			h.SetMode(e.mode)
		}
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		if e.size > 0 {
			w.Write(make([]byte, e.size))
		} else {
			w.Write([]byte(e.body))
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func tarOf(t testing.TB, gz bool, ents ...zent) []byte {
	t.Helper()
	var buf bytes.Buffer
	var tw *tar.Writer
	var zw *gzip.Writer
	if gz {
		zw = gzip.NewWriter(&buf)
		tw = tar.NewWriter(zw)
	} else {
		tw = tar.NewWriter(&buf)
	}
	for _, e := range ents {
		h := &tar.Header{Name: e.name, Mode: 0o644, Typeflag: e.typ, Linkname: e.link, Format: tar.FormatPAX}
		body := []byte(e.body)
		if e.size > 0 {
			body = make([]byte, e.size)
		}
		switch {
		case h.Typeflag != 0:
		case strings.HasSuffix(e.name, "/"):
			h.Typeflag = tar.TypeDir
		default:
			h.Typeflag = tar.TypeReg
		}
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(body))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			tw.Write(body)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if zw != nil {
		zw.Close()
	}
	return buf.Bytes()
}

var (
	top    = zent{name: "Local State", body: `{"os_crypt":{}}`}
	cookie = zent{name: "Default/Cookies", body: "cookies"}
)

// TestCheck: good archives of each format are accepted and counted;
// hostile ones are refused with an error naming what is wrong.
func TestCheck(t *testing.T) {
	small := &userdata.Limits{MaxBytes: 1 << 20, MaxEntries: 50}
	many := []zent{top}
	for i := range 60 {
		many = append(many, zent{name: "Default/f" + strings.Repeat("x", i)})
	}
	for _, tc := range []struct {
		name    string
		archive []byte
		want    string // "" accepted; else a part of the error
	}{
		{"zip", zipOf(t, top, zent{name: "Default/"}, cookie), ""},
		{"zip with ./", zipOf(t, zent{name: "./"}, zent{name: "./Local State"}, zent{name: "./Default/Cookies"}), ""},
		{"tar", tarOf(t, false, top, zent{name: "Default/"}, cookie), ""},
		{"tar.gz", tarOf(t, true, top, cookie), ""},
		{"zip bomb", zipOf(t, top, zent{name: "Default/big", size: 8 << 20}), "unpack to more than 1048576 bytes"},
		{"zip bomb in parts", zipOf(t, top, zent{name: "a", size: 600 << 10}, zent{name: "b", size: 600 << 10}), "unpack to more than"},
		{"tar.gz bomb", tarOf(t, true, top, zent{name: "Default/big", size: 8 << 20}), "more than 1048576 bytes"},
		{"too many entries zip", zipOf(t, many...), "more than 50 entries"},
		{"too many entries tar", tarOf(t, true, many...), "more than 50 entries"},
		{"dotdot zip", zipOf(t, top, zent{name: "../evil", body: "x"}), `"../evil": a path leaving the profile`},
		{"dotdot inside", zipOf(t, top, zent{name: "Default/../../evil"}), "leaving the profile"},
		{"dotdot tar", tarOf(t, false, top, zent{name: "a/../../x"}), "leaving the profile"},
		{"absolute", tarOf(t, false, top, zent{name: "/etc/cron.d/x"}), "an absolute path"},
		{"backslash", zipOf(t, top, zent{name: `..\evil`}), "a backslash"},
		{"unclean", zipOf(t, top, zent{name: "Default//Cookies"}), "not in its clean form"},
		{"deep", zipOf(t, top, zent{name: strings.Repeat("d/", 70) + "f"}), "more than 64 levels deep"},
		{"symlink zip", zipOf(t, top, zent{name: "Default/Cookies", body: "/etc/passwd", mode: fs.ModeSymlink | 0o777}), "is a symbolic link"},
		{"symlink tar", tarOf(t, false, top, zent{name: "Default", typ: tar.TypeSymlink, link: "/"}), "is a symbolic link"},
		{"hard link", tarOf(t, false, top, zent{name: "x", typ: tar.TypeLink, link: "/etc/shadow"}), "is a hard link"},
		{"char device", tarOf(t, false, top, zent{name: "null", typ: tar.TypeChar}), "is a device"},
		{"block device", tarOf(t, false, top, zent{name: "sda", typ: tar.TypeBlock}), "is a device"},
		{"fifo tar", tarOf(t, false, top, zent{name: "p", typ: tar.TypeFifo}), "is a FIFO"},
		{"fifo zip", zipOf(t, top, zent{name: "p", mode: fs.ModeNamedPipe | 0o644}), "is a FIFO"},
		{"device zip", zipOf(t, top, zent{name: "d", mode: fs.ModeDevice | fs.ModeCharDevice | 0o644}), "is a device"},
		{"twice", zipOf(t, top, cookie, cookie), "appears twice"},
		{"file then inside", zipOf(t, top, zent{name: "Default"}, cookie), `inside "Default", which is a file`},
		{"dir then file", tarOf(t, false, top, zent{name: "Default/"}, zent{name: "Default"}), "appears twice"},
		{"no Local State", zipOf(t, cookie), `no "Local State" at the archive's top`},
		{"wrapped folder", zipOf(t, zent{name: "profile/Local State"}), `no "Local State"`},
		{"not an archive", []byte("hello, world"), "not a zip, tar or tar.gz archive"},
		{"empty", nil, "not a zip, tar or tar.gz archive"},
		{"truncated zip", zipOf(t, top, cookie)[:40], "not a readable zip archive"},
		{"truncated tar.gz", tarOf(t, true, top, cookie)[:30], "not a readable tar archive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sum, err := userdata.Check(tc.archive, small)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if sum.Files != 2 && sum.Files != 1 {
					t.Errorf("summary %+v", sum)
				}
				return
			}
			if err == nil || !errors.Is(err, userdata.ErrRefused) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want ErrRefused with %q", err, tc.want)
			}
		})
	}
}

// TestZipEntriesCountedFirst: a zip whose central directory declares more
// entries than the limit is refused from its end record, before the
// directory is read (a forged count too: the records are not there).
func TestZipEntriesCountedFirst(t *testing.T) {
	b := zipOf(t, top, cookie)
	forged := append([]byte{}, b...)
	eocd := bytes.LastIndex(forged, []byte("PK\x05\x06"))
	forged[eocd+8], forged[eocd+9] = 0x30, 0x75 // 30000 on this disk
	forged[eocd+10], forged[eocd+11] = 0x30, 0x75
	_, err := userdata.Check(forged, &userdata.Limits{MaxEntries: 20000})
	if err == nil || !strings.Contains(err.Error(), "more than 20000 entries") {
		t.Fatalf("a declared count over the limit: %v", err)
	}
	if _, err := userdata.Check(b, &userdata.Limits{MaxEntries: 2}); err != nil {
		t.Fatalf("two entries, limit two: %v", err)
	}
	// More than 65535 entries: the count is in the zip64 record.
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for i := range 70000 {
		zw.CreateHeader(&zip.FileHeader{Name: "d/" + strconv.Itoa(i), Method: zip.Store})
	}
	zw.Close()
	big := buf.Bytes()
	if !bytes.Contains(big[len(big)-200:], []byte("PK\x06\x06")) {
		t.Fatal("the writer made no zip64 record")
	}
	if n, ok := userdata.ZipEntries(big); !ok || n != 70000 {
		t.Fatalf("the zip64 count read: %d, %v", n, ok)
	}
	if n, ok := userdata.ZipEntries(forged); !ok || n != 30000 {
		t.Fatalf("the count read: %d, %v", n, ok)
	}
	if _, err := userdata.Check(big, nil); err == nil || !strings.Contains(err.Error(), "more than 20000 entries") {
		t.Fatalf("a zip64 archive over the limit: %v", err)
	}
}

// TestCheckCounts what the good archive holds.
func TestCheckCounts(t *testing.T) {
	sum, err := userdata.Check(tarOf(t, true, top, zent{name: "Default/"}, cookie), nil)
	if err != nil {
		t.Fatal(err)
	}
	if *sum != (userdata.Summary{Format: "tar.gz", Files: 2, Dirs: 1, Bytes: int64(len(top.body) + len(cookie.body))}) {
		t.Fatalf("%+v", sum)
	}
}

// TestExtract unpacks a good archive with private modes, refuses an
// existing directory, and leaves nothing of a refused archive.
func TestExtract(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "p")
	if err := userdata.Extract(zipOf(t, top, cookie, zent{name: "Default/Local Storage/leveldb/"}), dir, nil); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "Default", "Cookies"))
	if err != nil || string(b) != "cookies" {
		t.Fatalf("%q %v", b, err)
	}
	for _, p := range []string{"", "Default", "Default/Local Storage/leveldb"} {
		if fi, err := os.Stat(filepath.Join(dir, p)); err != nil || fi.Mode().Perm() != 0o700 || !fi.IsDir() {
			t.Errorf("%q: %v %v", p, fi, err)
		}
	}
	if fi, _ := os.Stat(filepath.Join(dir, "Local State")); fi.Mode().Perm() != 0o600 {
		t.Errorf("Local State mode %v", fi.Mode())
	}
	if err := userdata.Extract(zipOf(t, top), dir, nil); !errors.Is(err, fs.ErrExist) {
		t.Errorf("into an existing directory: %v", err)
	}

	bad := filepath.Join(t.TempDir(), "bad")
	err = userdata.Extract(zipOf(t, top, cookie, zent{name: "../escape", body: "x"}), bad, nil)
	if !errors.Is(err, userdata.ErrRefused) {
		t.Fatalf("%v", err)
	}
	if _, err := os.Stat(bad); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the refused archive's directory is left: %v", err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(bad), "escape")); err == nil {
		t.Error("an entry escaped")
	}
}

// FuzzCheck: no archive makes Check panic, and what it accepts Extract
// unpacks within the directory.
func FuzzCheck(f *testing.F) {
	f.Add(zipOf(f, top, cookie))
	f.Add(tarOf(f, false, top, zent{name: "Default/"}, cookie))
	f.Add(tarOf(f, true, top, cookie))
	f.Add(zipOf(f, top, zent{name: "../x"}))
	lim := &userdata.Limits{MaxBytes: 1 << 20, MaxEntries: 100}
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, err := userdata.Check(b, lim); err != nil {
			return
		}
		parent := t.TempDir()
		if err := userdata.Extract(b, filepath.Join(parent, "p"), lim); err != nil {
			return
		}
		entries, _ := os.ReadDir(parent)
		if len(entries) != 1 {
			t.Fatalf("Extract wrote beside its directory: %v", entries)
		}
	})
}

// TestArchive: a user-data directory is packed with its regular files
// and directories, without its links (one leading out of it), FIFOs,
// caches and lock links; what it packs Check accepts and Extract
// unpacks to the same files. A directory beyond the limits, or without
// "Local State", is refused.
func TestArchive(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte("not for the archive"), 0o600)
	files := map[string]string{"Local State": "{}", "Default/Cookies": "cookie jar", "Default/Local Storage/leveldb/000003.log": "kv"}
	for name, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		os.MkdirAll(filepath.Dir(p), 0o700)
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(filepath.Join(dir, "Default", "Cache", "Cache_Data"), 0o700)
	os.WriteFile(filepath.Join(dir, "Default", "Cache", "Cache_Data", "data_0"), []byte("cached"), 0o600)
	os.Symlink(secret, filepath.Join(dir, "Default", "leak"))
	os.Symlink("host-1234", filepath.Join(dir, "SingletonLock"))
	syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600)

	archive, err := userdata.Archive(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(archive, []byte("not for the archive")) {
		t.Fatal("the archive holds a linked file's contents")
	}
	sum, err := userdata.Check(archive, nil)
	if err != nil || sum.Format != "tar.gz" || sum.Files != len(files) {
		t.Fatalf("Check: %+v, %v", sum, err)
	}
	out := filepath.Join(t.TempDir(), "out")
	if err := userdata.Extract(archive, out, nil); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(p)
			rel, _ := filepath.Rel(out, p)
			got[filepath.ToSlash(rel)] = string(b)
		}
		return err
	})
	if fmt.Sprint(got) != fmt.Sprint(files) {
		t.Errorf("unpacked %v, want %v", got, files)
	}

	for _, c := range []struct {
		lim  userdata.Limits
		want string
	}{
		{userdata.Limits{MaxBytes: 5}, "more than 5 bytes"},
		{userdata.Limits{MaxEntries: 3}, "more than 3 entries"},
	} {
		if _, err := userdata.Archive(dir, &c.lim); !errors.Is(err, userdata.ErrRefused) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Archive within %+v: %v", c.lim, err)
		}
	}
	os.Remove(filepath.Join(dir, "Local State"))
	if _, err := userdata.Archive(dir, nil); !errors.Is(err, userdata.ErrRefused) || !strings.Contains(err.Error(), "Local State") {
		t.Errorf("Archive without Local State: %v", err)
	}
}
