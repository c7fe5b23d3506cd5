package browser

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/chromedp/cdproto"
	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/dom"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// Bounds of the files a browser with Options.Files downloads and uploads.
const (
	// MaxDownloadBytes is the default of Options.MaxDownloadBytes.
	MaxDownloadBytes = 64 << 20
	// MaxDownloads is the default of Options.MaxDownloads.
	MaxDownloads = 50
	// MaxUploadBytes bounds one file browser_file_upload gives a page.
	MaxUploadBytes = 64 << 20
	// maxUploads bounds the files browser_file_upload copies for the
	// pages of one browser (they stay until it closes: a page reads a
	// chosen file when it sends it).
	maxUploads = 100
)

// files is what a browser with Options.Files keeps of its downloads and
// uploads: a private directory Chromium downloads into and reads chosen
// files from, and the notes of finished downloads for the next result.
type files struct {
	dir     string // the session's files folder (Options.Files)
	maxN    int    // Options.MaxDownloads
	maxSize int64  // Options.MaxDownloadBytes
	scratch string // private: downloads in progress, copies of uploads

	mu        sync.Mutex
	names     map[string]string // a download's GUID: its suggested name
	started   int               // downloads begun
	uploads   int               // files copied for uploads
	notes     []string
	cancelled map[string]bool
	cancels   chan struct{} // cancellations of downloads beyond the bound in flight
}

// startFiles lets Chromium download into a private directory, watching
// its downloads until ctx ends. b.mu is held.
func (b *Browser) startFiles(ctx context.Context) error {
	scratch, err := os.MkdirTemp("", "hrns-browser-files-")
	if err != nil {
		return fmt.Errorf("browser: the downloads' directory: %w", err)
	}
	f := &files{dir: b.o.Files, maxN: b.o.MaxDownloads, maxSize: b.o.MaxDownloadBytes, scratch: scratch, names: map[string]string{}, cancelled: map[string]bool{}, cancels: make(chan struct{}, 4)}
	b.files = f
	c := chromedp.FromContext(b.bctx)
	begin, cancelBegin := c.Browser.Subscribe(cdproto.EventBrowserDownloadWillBegin)
	progress, cancelProgress := c.Browser.Subscribe(cdproto.EventBrowserDownloadProgress)
	on := true
	if _, err := cdp.Call(ctx, c.Browser, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{
		Behavior: browser.SetDownloadBehaviorBehaviorAllowAndName, DownloadPath: scratch, EventsEnabled: &on}); err != nil {
		cancelBegin()
		cancelProgress()
		return fmt.Errorf("browser: allowing downloads: %w", err)
	}
	bctx := b.bctx
	go func() {
		defer cancelBegin()
		defer cancelProgress()
		for {
			select {
			case <-bctx.Done():
				return
			case raw, ok := <-begin:
				if !ok {
					return
				}
				var ev browser.EventDownloadWillBegin
				if json.Unmarshal(raw, &ev) == nil {
					f.begin(bctx, c.Browser, &ev)
				}
			case raw, ok := <-progress:
				if !ok {
					return
				}
				var ev browser.EventDownloadProgress
				if json.Unmarshal(raw, &ev) == nil {
					f.progress(bctx, c.Browser, &ev)
				}
			}
		}
	}()
	return nil
}

func (f *files) note(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.notes) < 20 {
		f.notes = append(f.notes, s)
	}
}

// takeNotes returns the notes of downloads since the last call.
func (f *files) takeNotes() []string {
	if f == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.notes
	f.notes = nil
	return n
}

func (f *files) cancel(ctx context.Context, s cdp.Session, guid, why string) {
	f.mu.Lock()
	name, accepted := f.names[guid]
	done := f.cancelled[guid]
	if accepted {
		f.cancelled[guid] = true
	}
	f.mu.Unlock()
	if done || !accepted {
		return
	}
	f.note(fmt.Sprintf("The download of %s was cancelled: %s.", quote(name, 200), why))
	go func() {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		cdp.Call(cctx, s, browser.CancelDownload, browser.CancelDownloadParams{GUID: guid})
	}()
}

// begin accepts a download, at most f.maxN of them: later ones
// are cancelled (a few cancellations at a time; one not sent is still
// never saved, since only accepted downloads are) and said once.
func (f *files) begin(ctx context.Context, s cdp.Session, ev *browser.EventDownloadWillBegin) {
	f.mu.Lock()
	f.started++
	n := f.started
	if n <= f.maxN {
		f.names[ev.GUID] = ev.SuggestedFilename
	}
	f.mu.Unlock()
	if n <= f.maxN {
		return
	}
	if n == f.maxN+1 {
		f.note(fmt.Sprintf("Downloads beyond %d are cancelled: this browser saves at most %d.", f.maxN, f.maxN))
	}
	select {
	case f.cancels <- struct{}{}:
		go func() {
			defer func() { <-f.cancels }()
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			cdp.Call(cctx, s, browser.CancelDownload, browser.CancelDownloadParams{GUID: ev.GUID})
		}()
	default:
	}
}

func (f *files) progress(ctx context.Context, s cdp.Session, ev *browser.EventDownloadProgress) {
	switch ev.State {
	case browser.DownloadProgressStateInProgress:
		if ev.ReceivedBytes > float64(f.maxSize) || ev.TotalBytes > float64(f.maxSize) {
			f.cancel(ctx, s, ev.GUID, fmt.Sprintf("it is larger than %d bytes", f.maxSize))
		}
	case browser.DownloadProgressStateCanceled:
		if isGUID(ev.GUID) {
			os.Remove(filepath.Join(f.scratch, ev.GUID))
		}
	case browser.DownloadProgressStateCompleted:
		f.mu.Lock()
		name, accepted := f.names[ev.GUID]
		cancelled := f.cancelled[ev.GUID]
		f.mu.Unlock()
		if !isGUID(ev.GUID) {
			return
		}
		src := filepath.Join(f.scratch, ev.GUID)
		defer os.Remove(src)
		if cancelled || !accepted {
			return
		}
		saved, size, err := f.save(src, safeFileName(name))
		if err != nil {
			f.note(fmt.Sprintf("The download of %s could not be saved: %v.", quote(name, 200), err))
			return
		}
		f.note(fmt.Sprintf("Downloaded %s into files/%s (%d bytes).", quote(name, 200), saved, size))
	}
}

// isGUID reports whether s can name a file of the scratch directory.
func isGUID(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'f' || r >= 'A' && r <= 'F') {
			return false
		}
	}
	return true
}

// openFiles opens the files folder as an os.Root, making it if needed:
// it is opened from its parent (the session's workspace), so that a
// link put in the folder's place cannot lead out of the workspace.
func openFiles(dir string) (*os.Root, error) {
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return nil, err
	}
	parent, err := os.OpenRoot(filepath.Dir(dir))
	if err != nil {
		return nil, err
	}
	defer parent.Close()
	base := filepath.Base(dir)
	if err := parent.Mkdir(base, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, err
	}
	return parent.OpenRoot(base)
}

// save copies the finished download src into the files folder as name,
// a new file (" (2)", " (3)"... before the extension when taken).
func (f *files) save(src, name string) (string, int64, error) {
	in, err := os.Open(src)
	if err != nil {
		return "", 0, err
	}
	defer in.Close()
	root, err := openFiles(f.dir)
	if err != nil {
		return "", 0, err
	}
	defer root.Close()
	ext := path.Ext(name)
	stem := strings.TrimSuffix(name, ext)
	for k := 1; k <= 100; k++ {
		n := name
		if k > 1 {
			n = fmt.Sprintf("%s (%d)%s", stem, k, ext)
		}
		out, err := root.OpenFile(n, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", 0, err
		}
		size, err := io.Copy(out, io.LimitReader(in, f.maxSize+1))
		if err == nil && size > f.maxSize {
			err = fmt.Errorf("larger than %d bytes", f.maxSize)
		}
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			root.Remove(n)
			return "", 0, err
		}
		return n, size, nil
	}
	return "", 0, fmt.Errorf("100 files named like %q already", name)
}

// safeFileName makes a page's suggested name a file name: its last
// element, without control or format characters, separators, a leading
// dot or spaces, at most 200 bytes; "download" when nothing is left.
func safeFileName(s string) string {
	if i := strings.LastIndexAny(s, `/\`); i >= 0 {
		s = s[i+1:]
	}
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == unicode.ReplacementChar {
			return -1
		}
		return r
	}, s)
	s = strings.TrimLeft(strings.TrimSpace(s), ".")
	for len(s) > 200 {
		_, size := lastRune(s)
		s = s[:len(s)-size]
	}
	if s = strings.TrimSpace(s); s == "" {
		return "download"
	}
	return s
}

func lastRune(s string) (rune, int) {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i]&0xC0 != 0x80 {
			return []rune(s[i:])[0], len(s) - i
		}
	}
	return 0, 1
}

// chooser is a file chooser a page opened, waiting for browser_file_upload.
type chooser struct {
	mode page.FileChooserOpenedMode
	node cdp.BackendNodeID
}

// watchChoosers makes the tab's file choosers wait for
// browser_file_upload instead of opening a dialog. It is called by attach
// when the browser has Options.Files.
func (t *tab) watchChoosers(ctx context.Context) error {
	tg := t.target()
	opened, cancel := tg.Subscribe(cdproto.EventPageFileChooserOpened)
	if _, err := cdp.Call(ctx, tg, page.SetInterceptFileChooserDialog, page.SetInterceptFileChooserDialogParams{Enabled: true}); err != nil {
		cancel()
		return fmt.Errorf("browser: intercepting file choosers: %w", err)
	}
	go func() {
		defer cancel()
		for {
			select {
			case <-t.ctx.Done():
				return
			case raw, ok := <-opened:
				if !ok {
					return
				}
				var ev page.EventFileChooserOpened
				if json.Unmarshal(raw, &ev) != nil {
					continue
				}
				t.mu.Lock()
				t.chooser = &chooser{mode: ev.Mode, node: ev.BackendNodeID}
				t.mu.Unlock()
			}
		}
	}()
	return nil
}

// pendingChooser says, for a result, that a file chooser waits.
func (t *tab) pendingChooser() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.chooser == nil {
		return ""
	}
	many := "one file"
	if t.chooser.mode == page.FileChooserOpenedModeSelectMultiple {
		many = "one or more files"
	}
	return "A file chooser is open (" + many + "): call browser_file_upload with the paths of files of your files folder (files/NAME) to choose them, or with no paths to cancel it."
}

// upload answers browser_file_upload on the tab: the files are read from
// the files folder (through an os.Root: no path or link leads out of
// it), copied into the browser's private directory, and given to the
// chooser's input.
func (b *Browser) upload(ctx context.Context, t *tab, paths []string) (string, error) {
	if b.files == nil {
		return "", errors.New("this browser has no files folder: it cannot upload files")
	}
	t.mu.Lock()
	ch := t.chooser
	t.chooser = nil
	t.mu.Unlock()
	if ch == nil {
		return "", errors.New("no file chooser is open: click the page's file input (or the button that opens it) first, then call browser_file_upload")
	}
	if len(paths) == 0 {
		return "The file chooser was cancelled.", nil
	}
	if ch.mode != page.FileChooserOpenedModeSelectMultiple && len(paths) > 1 {
		t.mu.Lock()
		t.chooser = ch
		t.mu.Unlock()
		return "", fmt.Errorf("the file chooser takes one file, not %d", len(paths))
	}
	if ch.node == 0 {
		return "", errors.New("the page opened a file chooser without a file input: hrns can only fill file inputs")
	}
	f := b.files
	f.mu.Lock()
	if f.uploads+len(paths) > maxUploads {
		f.mu.Unlock()
		return "", fmt.Errorf("this browser copied %d files for uploads already, the most it may", f.uploads)
	}
	f.uploads += len(paths)
	n := f.uploads
	f.mu.Unlock()
	root, err := openFiles(f.dir)
	if err != nil {
		return "", err
	}
	defer root.Close()
	stage := filepath.Join(f.scratch, fmt.Sprintf("upload-%d", n))
	if err := os.Mkdir(stage, 0o700); err != nil {
		return "", err
	}
	var staged, names []string
	for _, p := range paths {
		name, err := filesPath(p, f.dir)
		if err != nil {
			return "", err
		}
		dst := filepath.Join(stage, fmt.Sprint(len(staged)), path.Base(name))
		if err := copyFrom(root, name, dst); err != nil {
			return "", fmt.Errorf("files/%s: %w", name, err)
		}
		staged = append(staged, dst)
		names = append(names, "files/"+name)
	}
	if err := t.settleAfter(ctx, func(ctx context.Context) error {
		_, err := cdp.Call(ctx, t.target(), dom.SetFileInputFiles, dom.SetFileInputFilesParams{Files: staged, BackendNodeID: ch.node})
		return err
	}); err != nil {
		return "", err
	}
	return "Chose " + strings.Join(names, ", ") + ".", nil
}

// filesPath is the path within the files folder dir that p names:
// "files/NAME" (as the session's messages name them), "NAME", or dir's
// absolute path followed by /NAME.
func filesPath(p, dir string) (string, error) {
	name := p
	if rest, ok := strings.CutPrefix(p, filepath.Clean(dir)+"/"); ok && filepath.IsAbs(p) {
		name = rest
	} else if rest, ok := strings.CutPrefix(p, "files/"); ok {
		name = rest
	}
	if name == "" || !fs.ValidPath(name) || strings.Contains(name, `\`) {
		return "", fmt.Errorf("%s is not a file of your files folder: give files/NAME", quote(p, 200))
	}
	return name, nil
}

// copyFrom copies the regular file name of root into dst (a new file,
// its directory made), at most MaxUploadBytes.
func copyFrom(root *os.Root, name, dst string) error {
	// Stat first: opening a FIFO would wait for a writer.
	if info, err := root.Stat(name); err == nil && !info.Mode().IsRegular() {
		return errors.New("not a regular file")
	}
	in, err := root.Open(name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return errors.New("no such file")
		}
		return err
	}
	defer in.Close()
	info, err := in.Stat()
	if err != nil {
		return err
	}
	if !info.Mode().IsRegular() {
		return errors.New("not a regular file")
	}
	if info.Size() > MaxUploadBytes {
		return fmt.Errorf("larger than %d bytes", MaxUploadBytes)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, io.LimitReader(in, MaxUploadBytes))
	return errors.Join(err, out.Close())
}
