package browser_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/browser"
)

// TestFiles: a browser with a files folder gives a page's file input a
// file of the folder (browser_file_upload after the click that opens the
// chooser), and saves what a page downloads into the folder (named as
// the page suggests, made safe: TestSafeFileName), saying so. Paths out of the
// folder, links leading out of it, missing files, and an upload with no
// chooser open are refused; without a files folder, downloads stay
// refused.
func TestFiles(t *testing.T) {
	needChromium(t)
	t.Parallel()
	var mu sync.Mutex
	var got []string
	mux := http.NewServeMux()
	mux.HandleFunc("GET /form", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><title>Upload</title><form method=post action=/up enctype=multipart/form-data>
			<label>Document <input type=file name=doc></label><button>Send</button></form>
			<p><a href="/dl" download>Get the report</a></p>`)
	})
	mux.HandleFunc("POST /up", func(w http.ResponseWriter, r *http.Request) {
		f, h, err := r.FormFile("doc")
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		b, _ := io.ReadAll(f)
		mu.Lock()
		got = append(got, h.Filename+"="+string(b))
		mu.Unlock()
		fmt.Fprint(w, `<!doctype html><title>Sent</title><p>received</p>`)
	})
	mux.HandleFunc("GET /dl", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/csv")
		w.Header().Set("Content-Disposition", `attachment; filename="../../.report .csv"`)
		fmt.Fprint(w, "a,b\n1,2\n")
	})
	site := httptest.NewServer(mux)
	defer site.Close()

	ws := t.TempDir()
	dir := filepath.Join(ws, "files")
	os.Mkdir(dir, 0o700)
	os.WriteFile(filepath.Join(dir, "hello.txt"), []byte("hello from the user"), 0o600)
	secret := filepath.Join(t.TempDir(), "secret.txt")
	os.WriteFile(secret, []byte("not for pages"), 0o600)
	os.Symlink(secret, filepath.Join(dir, "leak.txt"))

	b := browser.New(&browser.Options{Allow: allowOnly(site), Files: dir})
	t.Cleanup(func() { b.Close() })
	ts := b.Tools()

	if _, err := invoke(ts, "browser_file_upload", map[string]any{"paths": []string{"files/hello.txt"}}); err == nil || !strings.Contains(err.Error(), "no file chooser is open") {
		t.Fatalf("an upload without a chooser: %v", err)
	}
	snap := call(t, ts, "browser_navigate", map[string]any{"url": site.URL + "/form"})
	input := ref(t, snap, "button", "Document")
	out := call(t, ts, "browser_click", map[string]any{"element": "the file input", "ref": input})
	mustContain(t, out, "A file chooser is open (one file)")
	for _, bad := range [][]string{{"../secret.txt"}, {"files/leak.txt"}, {secret}, {"files/missing.txt"}, {"files/hello.txt", "files/hello.txt"}} {
		if _, err := invoke(ts, "browser_file_upload", map[string]any{"paths": bad}); err == nil {
			t.Errorf("uploading %q was accepted", bad)
		}
		// A refused path leaves no chooser for a wrong count only: open
		// it again.
		call(t, ts, "browser_click", map[string]any{"element": "the file input", "ref": input})
	}
	out = call(t, ts, "browser_file_upload", map[string]any{"paths": []string{"files/hello.txt"}})
	mustContain(t, out, "Chose files/hello.txt")
	snap = call(t, ts, "browser_snapshot", struct{}{})
	call(t, ts, "browser_click", map[string]any{"element": "send", "ref": ref(t, snap, "button", "Send")})
	mu.Lock()
	if fmt.Sprint(got) != "[hello.txt=hello from the user]" {
		t.Errorf("the site received %v", got)
	}
	mu.Unlock()

	call(t, ts, "browser_navigate", map[string]any{"url": site.URL + "/form"})
	snap = call(t, ts, "browser_snapshot", struct{}{})
	out = call(t, ts, "browser_click", map[string]any{"element": "report", "ref": ref(t, snap, "link", "Get the report")})
	// The download ends after the click: a later result reports it.
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(out, "Downloaded") && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		out = call(t, ts, "browser_wait_for", map[string]any{"time": 0.1})
	}
	// Chromium suggests "_.._.report .csv" for that name.
	mustContain(t, out, `Downloaded "_.._.report .csv" into files/_.._.report .csv (8 bytes)`)
	if b, err := os.ReadFile(filepath.Join(dir, "_.._.report .csv")); err != nil || string(b) != "a,b\n1,2\n" {
		t.Errorf("files/_.._.report .csv: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(ws, ".report .csv")); err == nil {
		t.Error("the download left the files folder")
	}

	// Bounds: a download larger than MaxDownloadBytes is cancelled, and
	// beyond MaxDownloads none is saved.
	small := browser.New(&browser.Options{Allow: allowOnly(site), Files: dir, MaxDownloadBytes: 4, MaxDownloads: 1})
	t.Cleanup(func() { small.Close() })
	sts := small.Tools()
	before, _ := os.ReadDir(dir)
	call(t, sts, "browser_navigate", map[string]any{"url": site.URL + "/form"})
	snap = call(t, sts, "browser_snapshot", struct{}{})
	link := ref(t, snap, "link", "Get the report")
	out = call(t, sts, "browser_click", map[string]any{"element": "report", "ref": link})
	for !strings.Contains(out, "was cancelled") && time.Now().Before(deadline.Add(30*time.Second)) {
		time.Sleep(100 * time.Millisecond)
		out = call(t, sts, "browser_wait_for", map[string]any{"time": 0.1})
	}
	mustContain(t, out, "it is larger than 4 bytes")
	out = call(t, sts, "browser_click", map[string]any{"element": "report", "ref": link})
	for !strings.Contains(out, "Downloads beyond 1") && time.Now().Before(deadline.Add(60*time.Second)) {
		time.Sleep(100 * time.Millisecond)
		out = call(t, sts, "browser_wait_for", map[string]any{"time": 0.1})
	}
	mustContain(t, out, "Downloads beyond 1 are cancelled")
	time.Sleep(300 * time.Millisecond) // what Chromium would still write
	if after, _ := os.ReadDir(dir); len(after) != len(before) {
		t.Errorf("the files folder had %d entries, then %d: a download beyond the bounds was saved", len(before), len(after))
	}

	// Without a files folder: no uploads, no downloads.
	plain := browser.New(&browser.Options{Allow: allowOnly(site)})
	t.Cleanup(func() { plain.Close() })
	pts := plain.Tools()
	call(t, pts, "browser_navigate", map[string]any{"url": site.URL + "/form"})
	if _, err := invoke(pts, "browser_navigate", map[string]any{"url": site.URL + "/dl"}); err == nil || !strings.Contains(err.Error(), "downloads are disabled") {
		t.Errorf("a download without a files folder: %v", err)
	}
	if _, err := invoke(pts, "browser_file_upload", map[string]any{"paths": []string{"files/hello.txt"}}); err == nil || !strings.Contains(err.Error(), "no files folder") {
		t.Errorf("an upload without a files folder: %v", err)
	}
}

// TestSafeFileName: a page's suggested name becomes a file name of the
// folder: no directories, control or format characters, leading dots or
// spaces, at most 200 bytes.
func TestSafeFileName(t *testing.T) {
	for in, want := range map[string]string{
		"report.csv": "report.csv", "../../etc/passwd": "passwd", `..\x.exe`: "x.exe", ".bashrc": "bashrc",
		"a\x00b\u202e.txt": "ab.txt", "  ": "download", "": "download", "...": "download",
		strings.Repeat("é", 150): strings.Repeat("é", 100),
	} {
		if got := browser.SafeFileName(in); got != want {
			t.Errorf("SafeFileName(%q) = %q, want %q", in, got, want)
		}
	}
}
