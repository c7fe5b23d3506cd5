// Package userdata checks and unpacks archives of Chromium user-data
// directories: the browser profiles that callers of hrns serve upload
// (/api/v2/browser-profiles) and that a session's browser starts from.
//
// An archive is a zip, a tar or a gzip-compressed tar of the directory's
// contents: "Local State" and the profile folders ("Default/Cookies",
// ...) at its top. Everything in it is untrusted, so [Check] and
// [Extract] refuse, with an error wrapping [ErrRefused] that names the
// entry:
//
//   - more entries than [Limits.MaxEntries], or contents that unpack to
//     more than [Limits.MaxBytes] (counted as they are read, not as the
//     headers claim: zip and tar bombs stop there);
//   - a path that could leave the directory: absolute, with a ".."
//     segment, a backslash, a NUL, or not in its clean form; or one
//     longer than 4096 bytes or 64 levels deep;
//   - anything but regular files and directories: symbolic links, hard
//     links, devices, FIFOs, sockets; encrypted zip entries;
//   - the same path twice, or a file where a directory is needed;
//   - an archive without "Local State" at its top (the directory zipped
//     as a folder instead of its contents, or not a user-data directory).
//
// Nothing of hrns is imported.
package userdata

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// ErrRefused is wrapped by every error about an archive's contents.
var ErrRefused = errors.New("browser profile archive refused")

// Limits bound what an archive may hold. The zero value of a field means
// its default.
type Limits struct {
	// MaxBytes bounds the unpacked size of all files together; 0 means
	// 512 MiB.
	MaxBytes int64
	// MaxEntries bounds the entries (files and directories); 0 means
	// 20000.
	MaxEntries int
}

func (l *Limits) withDefaults() Limits {
	var o Limits
	if l != nil {
		o = *l
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = 512 << 20
	}
	if o.MaxEntries <= 0 {
		o.MaxEntries = 20000
	}
	return o
}

// Summary describes an archive that [Check] accepted.
type Summary struct {
	// Format is "zip", "tar" or "tar.gz".
	Format string
	// Files and Dirs count the entries; Bytes is the files' unpacked size.
	Files, Dirs int
	Bytes       int64
}

// localState is the file every Chromium user-data directory has at its top.
const localState = "Local State"

// Check reads the whole archive, decompressing every file, and returns
// what it holds, or an error wrapping [ErrRefused].
func Check(archive []byte, lim *Limits) (*Summary, error) {
	return walk(archive, lim.withDefaults(), func(string, bool, io.Reader) error { return nil })
}

// Extract unpacks the archive into dir, which must not exist: it is
// created (mode 0700), files are written 0600 and directories 0700, all
// within dir (an [os.Root]). The archive is checked as it is unpacked, as
// [Check] would; on any error dir is removed.
func Extract(archive []byte, dir string, lim *Limits) (err error) {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	_, err = walk(archive, lim.withDefaults(), func(name string, isDir bool, r io.Reader) error {
		if isDir {
			return root.MkdirAll(filepath.FromSlash(name), 0o700)
		}
		if d := path.Dir(name); d != "." {
			if err := root.MkdirAll(filepath.FromSlash(d), 0o700); err != nil {
				return err
			}
		}
		f, err := root.OpenFile(filepath.FromSlash(name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		if _, err := io.Copy(f, r); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	})
	return err
}

// refused makes an error wrapping ErrRefused.
func refused(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrRefused, fmt.Sprintf(format, a...))
}

// walker keeps what the entries seen so far imply.
type walker struct {
	lim   Limits
	sum   Summary
	files map[string]bool
	dirs  map[string]bool
	fn    func(name string, isDir bool, r io.Reader) error
}

// walk calls fn for each entry of the archive, in order, with its clean
// name and, for a file, a reader of its contents bounded by what the
// limits leave.
func walk(archive []byte, lim Limits, fn func(name string, isDir bool, r io.Reader) error) (*Summary, error) {
	w := &walker{lim: lim, files: map[string]bool{}, dirs: map[string]bool{}, fn: fn}
	var err error
	switch {
	case bytes.HasPrefix(archive, []byte("PK\x03\x04")) || bytes.HasPrefix(archive, []byte("PK\x05\x06")):
		w.sum.Format = "zip"
		err = w.zip(archive)
	case bytes.HasPrefix(archive, []byte{0x1f, 0x8b}):
		w.sum.Format = "tar.gz"
		var zr *gzip.Reader
		if zr, err = gzip.NewReader(bytes.NewReader(archive)); err != nil {
			return nil, refused("not a readable gzip stream: %v", err)
		}
		zr.Multistream(false)
		err = w.tar(zr)
	case len(archive) >= 263 && (string(archive[257:262]) == "ustar"):
		w.sum.Format = "tar"
		err = w.tar(bytes.NewReader(archive))
	default:
		return nil, refused("not a zip, tar or tar.gz archive")
	}
	if err != nil {
		return nil, err
	}
	if !w.files[localState] {
		return nil, refused("not a Chromium user-data directory: no %q at the archive's top (archive the directory's contents, not the directory itself)", localState)
	}
	return &w.sum, nil
}

// entry checks one entry's name and kind and passes it on.
func (w *walker) entry(raw string, isDir bool, r io.Reader) error {
	if w.sum.Files+w.sum.Dirs >= w.lim.MaxEntries {
		return refused("more than %d entries", w.lim.MaxEntries)
	}
	name, err := cleanName(raw)
	if err != nil {
		return err
	}
	if name == "" { // "./": the top itself
		return nil
	}
	for d := path.Dir(name); d != "."; d = path.Dir(d) {
		if w.files[d] {
			return refused("entry %q is inside %q, which is a file", name, d)
		}
		if w.dirs[d] {
			break
		}
		w.dirs[d] = true
	}
	if w.files[name] || (!isDir && w.dirs[name]) {
		return refused("entry %q appears twice", name)
	}
	if isDir {
		w.dirs[name] = true
		w.sum.Dirs++
		return w.fn(name, true, nil)
	}
	w.files[name] = true
	w.sum.Files++
	c := &counter{r: r, left: w.lim.MaxBytes - w.sum.Bytes}
	if err := w.fn(name, false, c); err != nil {
		if errors.Is(err, errTooBig) {
			return refused("the files unpack to more than %d bytes", w.lim.MaxBytes)
		}
		if errors.Is(err, ErrRefused) {
			return err
		}
		return fmt.Errorf("entry %q: %w", name, err)
	}
	// Read what fn left, so that every byte is counted and checked.
	if _, err := io.Copy(io.Discard, c); err != nil {
		if errors.Is(err, errTooBig) {
			return refused("the files unpack to more than %d bytes", w.lim.MaxBytes)
		}
		return refused("entry %q cannot be read: %v", name, err)
	}
	w.sum.Bytes += c.n
	return nil
}

// cleanName returns an entry's name relative to the top, without a
// trailing slash, or refuses it.
func cleanName(raw string) (string, error) {
	name := strings.TrimPrefix(raw, "./")
	name = strings.TrimSuffix(name, "/")
	switch {
	case len(raw) > 4096:
		return "", refused("an entry's path is longer than 4096 bytes")
	case strings.ContainsAny(raw, "\\\x00"):
		return "", refused("entry %q: a backslash or NUL in a path", raw)
	case strings.HasPrefix(raw, "/"):
		return "", refused("entry %q: an absolute path", raw)
	case strings.Count(name, "/") >= 64:
		return "", refused("entry %q: more than 64 levels deep", raw)
	case name == "" || name == ".":
		return "", nil
	case name == ".." || strings.HasPrefix(name, "../") || strings.Contains(name, "/../") || strings.HasSuffix(name, "/.."):
		return "", refused("entry %q: a path leaving the profile (..)", raw)
	case path.Clean(name) != name || !filepath.IsLocal(filepath.FromSlash(name)):
		return "", refused("entry %q: a path not in its clean form", raw)
	}
	return name, nil
}

func (w *walker) zip(archive []byte) error {
	// The central directory's count first: zip.NewReader reads every
	// record of it into memory (a few hundred bytes each) before the
	// entries can be counted.
	if n, ok := zipEntries(archive); ok && n > uint64(w.lim.MaxEntries) {
		return refused("more than %d entries", w.lim.MaxEntries)
	}
	zr, err := zip.NewReader(bytes.NewReader(archive), int64(len(archive)))
	if err != nil && !errors.Is(err, zip.ErrInsecurePath) {
		return refused("not a readable zip archive: %v", err)
	}
	if len(zr.File) > w.lim.MaxEntries {
		return refused("more than %d entries", w.lim.MaxEntries)
	}
	for _, f := range zr.File {
		mode := f.Mode()
		switch {
		case mode&fs.ModeSymlink != 0:
			return refused("entry %q is a symbolic link", f.Name)
		case mode&(fs.ModeDevice|fs.ModeCharDevice) != 0:
			return refused("entry %q is a device", f.Name)
		case mode&fs.ModeNamedPipe != 0:
			return refused("entry %q is a FIFO", f.Name)
		case mode&(fs.ModeSocket|fs.ModeIrregular) != 0:
			return refused("entry %q is not a regular file or directory", f.Name)
		case f.Flags&0x1 != 0:
			return refused("entry %q is encrypted", f.Name)
		}
		if mode.IsDir() || strings.HasSuffix(f.Name, "/") {
			if err := w.entry(f.Name, true, nil); err != nil {
				return err
			}
			continue
		}
		rc, err := f.Open()
		if err != nil {
			return refused("entry %q cannot be read: %v", f.Name, err)
		}
		err = w.entry(f.Name, false, rc)
		rc.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

func (w *walker) tar(r io.Reader) error {
	// The whole stream is bounded too: headers, and the data of entries
	// the reader skips, are read as well as the files.
	stream := &counter{r: r, left: w.lim.MaxBytes + int64(w.lim.MaxEntries)*4096 + 4<<20}
	tr := tar.NewReader(stream)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			if errors.Is(err, errTooBig) {
				return refused("the archive unpacks to more than %d bytes", w.lim.MaxBytes)
			}
			return refused("not a readable tar archive: %v", err)
		}
		switch h.Typeflag {
		//lint:ignore SA1019 old archives still carry the pre-POSIX regular-file flag
		case tar.TypeReg, tar.TypeRegA:
			err = w.entry(h.Name, false, tr)
		case tar.TypeDir:
			err = w.entry(h.Name, true, nil)
		case tar.TypeSymlink:
			return refused("entry %q is a symbolic link", h.Name)
		case tar.TypeLink:
			return refused("entry %q is a hard link", h.Name)
		case tar.TypeChar, tar.TypeBlock:
			return refused("entry %q is a device", h.Name)
		case tar.TypeFifo:
			return refused("entry %q is a FIFO", h.Name)
		case tar.TypeXGlobalHeader:
			continue
		default:
			return refused("entry %q has type %q, not a regular file or directory", h.Name, h.Typeflag)
		}
		if err != nil {
			return err
		}
	}
}

// errTooBig: a counter's bound was reached.
var errTooBig = errors.New("too big")

// counter reads at most left bytes of r, counting them.
type counter struct {
	r    io.Reader
	left int64
	n    int64
}

func (c *counter) Read(p []byte) (int, error) {
	if c.left <= 0 {
		// One byte more tells a stream that ends here from one that
		// goes on.
		var one [1]byte
		for range 100 {
			n, err := c.r.Read(one[:])
			if n > 0 {
				return 0, errTooBig
			}
			if err != nil {
				return 0, err
			}
		}
		return 0, io.ErrNoProgress
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	c.n += int64(n)
	return n, err
}

// zipEntries reads the number of entries the archive's end of central
// directory record (or its zip64 record) declares; ok is false when it
// cannot be found.
func zipEntries(b []byte) (n uint64, ok bool) {
	const eocdLen = 22
	start := max(0, len(b)-eocdLen-0xffff)
	i := bytes.LastIndex(b[start:], []byte("PK\x05\x06"))
	if i < 0 || start+i+eocdLen > len(b) {
		return 0, false
	}
	eocd := start + i
	if n := binary.LittleEndian.Uint16(b[eocd+10:]); n != 0xffff {
		return uint64(n), true
	}
	// Zip64: the locator just before the record points to the zip64 end
	// of central directory record, which holds the count at offset 32.
	loc := eocd - 20
	if loc < 0 || !bytes.Equal(b[loc:loc+4], []byte("PK\x06\x07")) {
		return 0, false
	}
	off := binary.LittleEndian.Uint64(b[loc+8:])
	if off > uint64(len(b)) || uint64(len(b))-off < 40 || !bytes.Equal(b[off:off+4], []byte("PK\x06\x06")) {
		return 0, false
	}
	return binary.LittleEndian.Uint64(b[off+32:]), true
}

// skipped are the parts of a user-data directory [Archive] leaves out:
// caches Chromium rebuilds, crash reports, and the singleton lock links
// of a running browser.
var skipped = map[string]bool{
	"Cache": true, "Code Cache": true, "GPUCache": true, "DawnCache": true, "DawnGraphiteCache": true, "DawnWebGPUCache": true,
	"GrShaderCache": true, "GraphiteDawnCache": true, "ShaderCache": true, "component_crx_cache": true,
	"Crashpad": true, "Crash Reports": true, "BrowserMetrics": true, "optimization_guide_model_store": true,
	"SingletonLock": true, "SingletonSocket": true, "SingletonCookie": true,
}

// Archive packs the user-data directory dir into a gzip-compressed tar
// that [Check] accepts within lim: its regular files and directories
// (symbolic links, sockets and the like are left out, as are the caches
// and crash reports listed in skipped, at any depth), read through an
// [os.Root] so that nothing outside dir is read. It fails, wrapping
// [ErrRefused], when dir holds more than lim allows, or has no "Local
// State" (not a user-data directory).
func Archive(dir string, lim *Limits) ([]byte, error) {
	l := lim.withDefaults()
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	var entries int
	var size int64
	hasState := false
	err = fs.WalkDir(root.FS(), ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if name == "." {
			return nil
		}
		if skipped[path.Base(name)] {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if !d.IsDir() && !d.Type().IsRegular() {
			return nil // links, sockets, devices: not part of a profile
		}
		if entries++; entries > l.MaxEntries {
			return refused("the directory has more than %d entries", l.MaxEntries)
		}
		if strings.Count(name, "/") >= 64 || len(name) > 4096 {
			return refused("%q is too deep or too long a path", name)
		}
		if d.IsDir() {
			return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: 0o700})
		}
		f, err := root.Open(name)
		if err != nil {
			return err
		}
		defer f.Close()
		info, err := f.Stat()
		if err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return nil // replaced by something else since the walk saw it
		}
		if size += info.Size(); size > l.MaxBytes {
			return refused("the directory's files hold more than %d bytes", l.MaxBytes)
		}
		if name == localState {
			hasState = true
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o600, Size: info.Size(), ModTime: info.ModTime()}); err != nil {
			return err
		}
		// A file that grows meanwhile is cut at the size its header gave.
		n, err := io.Copy(tw, io.LimitReader(f, info.Size()))
		if err == nil && n < info.Size() {
			err = fmt.Errorf("%s shrank while it was archived", name)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if !hasState {
		return nil, refused("%s has no %q: not a Chromium user-data directory", filepath.Base(dir), localState)
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
