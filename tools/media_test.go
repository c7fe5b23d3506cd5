package tools_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/tools"
)

// upload calls upload_media on path and returns its output, or the error
// the model would read.
func upload(t *testing.T, ts *loop.Toolset, path string) (*loop.Output, error) {
	t.Helper()
	def, ok := ts.Lookup("upload_media")
	if !ok {
		t.Fatalf("no upload_media in %v", ts.Names())
	}
	raw, _ := json.Marshal(map[string]string{"path": path})
	out, err := def.Handler(t.Context(), &loop.Call{ID: "c1", Name: "upload_media", Arguments: raw})
	if err == nil && out.IsError {
		t.Fatalf("upload_media reported an error output instead of an error: %+v", out)
	}
	return out, err
}

func writeBytes(t *testing.T, dir, name string, b []byte) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func mediaTools(t *testing.T, dir string, opts *tools.MediaOptions) *loop.Toolset {
	t.Helper()
	ts, err := tools.Media(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

func TestUploadMediaTypes(t *testing.T) {
	dir := t.TempDir()
	pdf := pdfBytes("Hello, hrns")
	files := map[string][]byte{
		"chart.png":         pngBytes(t, 64, 48),
		"photo.jpg":         jpegBytes(t, 40, 30),
		"anim.gif":          gifBytes(t, 16, 8),
		"lossless.webp":     webpLossless(3, 2),
		"extended.webp":     webpExtended(7, 9),
		"docs/report.pdf":   pdf,
		"misnamed.pdf":      pngBytes(t, 5, 5), // the content counts, not the name
		"no-extension":      jpegBytes(t, 8, 8),
		"docs/UPPER.JPEG":   jpegBytes(t, 2, 2),
		"link-to-chart.png": nil, // a relative link inside the root
	}
	for name, b := range files {
		if b != nil {
			writeBytes(t, dir, name, b)
		}
	}
	linked := true
	if err := os.Symlink("chart.png", filepath.Join(dir, "link-to-chart.png")); err != nil {
		linked = false // no symbolic links here
	}
	tests := []struct {
		path     string
		kind     llm.PartKind
		mime     string
		text     string // the text part starts with it
		data     []byte
		docName  string
		needLink bool
	}{
		{path: "chart.png", kind: llm.PartImage, mime: "image/png", text: "chart.png: PNG image, 64x48 pixels, ", data: files["chart.png"]},
		{path: "photo.jpg", kind: llm.PartImage, mime: "image/jpeg", text: "photo.jpg: JPEG image, 40x30 pixels, ", data: files["photo.jpg"]},
		{path: "anim.gif", kind: llm.PartImage, mime: "image/gif", text: "anim.gif: GIF image, 16x8 pixels, ", data: files["anim.gif"]},
		{path: "lossless.webp", kind: llm.PartImage, mime: "image/webp", text: "lossless.webp: WebP image, 3x2 pixels, ", data: files["lossless.webp"]},
		{path: "extended.webp", kind: llm.PartImage, mime: "image/webp", text: "extended.webp: WebP image, 7x9 pixels, ", data: files["extended.webp"]},
		{path: "docs/report.pdf", kind: llm.PartDocument, mime: "application/pdf", text: "docs/report.pdf: PDF document, ", data: pdf, docName: "report.pdf"},
		{path: "./docs/../docs/report.pdf", kind: llm.PartDocument, mime: "application/pdf", text: "./docs/../docs/report.pdf: PDF document, ", data: pdf, docName: "report.pdf"},
		{path: filepath.Join(dir, "chart.png"), kind: llm.PartImage, mime: "image/png", text: filepath.Join(dir, "chart.png") + ": PNG image, 64x48", data: files["chart.png"]},
		{path: "misnamed.pdf", kind: llm.PartImage, mime: "image/png", text: "misnamed.pdf: PNG image, 5x5 pixels, ", data: files["misnamed.pdf"]},
		{path: "no-extension", kind: llm.PartImage, mime: "image/jpeg", text: "no-extension: JPEG image, 8x8 pixels, ", data: files["no-extension"]},
		{path: "docs/UPPER.JPEG", kind: llm.PartImage, mime: "image/jpeg", text: "docs/UPPER.JPEG: JPEG image, 2x2 pixels, ", data: files["docs/UPPER.JPEG"]},
		{path: "link-to-chart.png", kind: llm.PartImage, mime: "image/png", text: "link-to-chart.png: PNG image, 64x48 pixels, ", data: files["chart.png"], needLink: true},
	}
	ts := mediaTools(t, dir, nil)
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			if tt.needLink && !linked {
				t.Skip("no symbolic links")
			}
			out, err := upload(t, ts, tt.path)
			if err != nil {
				t.Fatal(err)
			}
			if len(out.Content) != 2 {
				t.Fatalf("%d parts, want a text and an attachment: %+v", len(out.Content), out.Content)
			}
			text, media := out.Content[0], out.Content[1]
			if text.Kind != llm.PartText || !strings.HasPrefix(text.Text, tt.text) || !strings.HasSuffix(text.Text, " (attached)") {
				t.Errorf("text part %q, want it to start with %q", text.Text, tt.text)
			}
			if media.Kind != tt.kind || media.Media == nil {
				t.Fatalf("attachment is a %s part (%+v), want %s", media.Kind, media.Media, tt.kind)
			}
			if media.Media.MIMEType != tt.mime || !bytes.Equal(media.Media.Data, tt.data) || media.Media.Name != tt.docName {
				t.Errorf("attachment %s %q (%d bytes), want %s %q (%d bytes)",
					media.Media.MIMEType, media.Media.Name, len(media.Media.Data), tt.mime, tt.docName, len(tt.data))
			}
		})
	}
	// The size is given in the text part.
	out, err := upload(t, ts, "docs/report.pdf")
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("docs/report.pdf: PDF document, %d bytes (attached)", len(pdf)); out.Content[0].Text != want {
		t.Errorf("got %q, want %q", out.Content[0].Text, want)
	}
}

func TestUploadMediaRefusals(t *testing.T) {
	dir := t.TempDir()
	png := pngBytes(t, 4, 4)
	bmp := make([]byte, 70)
	copy(bmp, "BM")
	files := map[string][]byte{
		"notes.txt":      []byte("just some notes\n"),
		"fake.png":       []byte("I am text, whatever my name says\n"),
		"logo.svg":       []byte(`<?xml version="1.0" encoding="UTF-8"?>` + "\n" + `<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><rect width="10" height="10"/></svg>`),
		"bare.svg":       []byte(`<svg xmlns="http://www.w3.org/2000/svg"><circle r="4"/></svg>`),
		"prog":           elfBytes(),
		"setup.exe":      append([]byte("MZ\x90\x00\x03\x00\x00\x00"), make([]byte, 200)...),
		"run.sh":         []byte("#!/bin/sh\necho hi\n"),
		"pic.bmp":        bmp,
		"random.bin":     {0x00, 0x01, 0x02, 0x03, 0xff, 0xfe, 0x10, 0x00},
		"empty.png":      {},
		"cut.pdf":        pdfBytes("x")[:200],
		"broken.png":     append(append([]byte(nil), png[:16]...), bytes.Repeat([]byte{0xAB}, 40)...),
		"cut.webp":       webpLossless(4, 4)[:20],
		"lying.webp":     append(webpLossless(4, 4), 0)[:len(webpLossless(4, 4))-2],
		"sub/nested.txt": []byte("x"),
	}
	for name, b := range files {
		writeBytes(t, dir, name, b)
	}
	ts := mediaTools(t, dir, nil)
	acceptedList := "upload_media accepts only PNG, JPEG, GIF and WebP images and PDF documents"
	tests := []struct {
		path string
		want []string
	}{
		{"notes.txt", []string{"notes.txt holds text (text/plain; charset=utf-8)", acceptedList}},
		{"fake.png", []string{"fake.png holds text", "fake.png holds text (text/plain; charset=utf-8), not a PNG image as its name suggests (the content counts, not the name); upload_media accepts", acceptedList}},
		{"logo.svg", []string{"logo.svg holds an SVG image, which is XML text, not a raster image", acceptedList}},
		{"bare.svg", []string{"bare.svg holds an SVG image", acceptedList}},
		{"prog", []string{"prog holds an executable program", acceptedList}},
		{"setup.exe", []string{"setup.exe holds an executable program", acceptedList}},
		{"run.sh", []string{"run.sh holds text", acceptedList}},
		{"pic.bmp", []string{"pic.bmp holds image/bmp", acceptedList}},
		{"random.bin", []string{"random.bin holds binary data of an unknown type", acceptedList}},
		{"empty.png", []string{"empty.png is empty"}},
		{"sub", []string{"sub is a directory"}},
		{"missing.png", []string{"missing.png does not exist"}},
		{"", []string{"path is required"}},
		{"cut.pdf", []string{"cut.pdf starts like a PDF but has no %%EOF marker at its end"}},
		{"broken.png", []string{"broken.png starts like a PNG image but cannot be read as one"}},
		{"cut.webp", []string{"cut.webp starts like a WebP image but cannot be read as one: it is too short"}},
		{"lying.webp", []string{"lying.webp starts like a WebP image but cannot be read as one: its RIFF header gives", "it is cut short"}},
	}
	for _, tt := range tests {
		out, err := upload(t, ts, tt.path)
		if err == nil {
			t.Errorf("%q: accepted: %+v", tt.path, out.Content[0])
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q: got %q, want it to contain %q", tt.path, err, w)
			}
		}
	}
}

func TestUploadMediaConfinement(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "data")
	writeBytes(t, parent, "secret.png", pngBytes(t, 2, 2))
	writeBytes(t, dir, "inside.png", pngBytes(t, 2, 2))
	links := map[string]string{
		"out-rel.png": "../secret.png",
		"out-abs.png": filepath.Join(parent, "secret.png"),
		"in-abs.png":  filepath.Join(dir, "inside.png"),
		"up":          "..",
	}
	haveLinks := true
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			haveLinks = false
			break
		}
	}
	ts := mediaTools(t, dir, nil)
	tests := []struct {
		path, want string
		link       bool
	}{
		{path: "../secret.png", want: `path "../secret.png" is outside the working directory`},
		{path: "sub/../../secret.png", want: "is outside the working directory"},
		{path: "..", want: "is outside the working directory"},
		{path: filepath.Join(parent, "secret.png"), want: "is outside the working directory"},
		{path: "/etc/passwd", want: "is outside the working directory"},
		{path: "a\x00b.png", want: "contains a NUL byte"},
		{path: "out-rel.png", want: "leads outside the working directory", link: true},
		{path: "out-abs.png", want: "leads outside the working directory", link: true},
		{path: "in-abs.png", want: "leads outside the working directory", link: true},
		{path: "up/secret.png", want: "leads outside the working directory", link: true},
	}
	for _, tt := range tests {
		if tt.link && !haveLinks {
			continue
		}
		out, err := upload(t, ts, tt.path)
		if err == nil {
			t.Errorf("%q: accepted: %+v", tt.path, out.Content[0])
			continue
		}
		if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: got %q, want %q", tt.path, err, tt.want)
		}
	}
	if _, err := upload(t, ts, "inside.png"); err != nil {
		t.Errorf("inside.png: %v", err)
	}
}

func TestUploadMediaSizeCaps(t *testing.T) {
	dir := t.TempDir()
	big := pngBytes(t, 300, 200) // some KiB: the gradient does not compress to nothing
	pdf := pdfBytes(strings.Repeat("long text ", 100))
	writeBytes(t, dir, "big.png", big)
	writeBytes(t, dir, "wide.png", pngBytes(t, 30, 2))
	writeBytes(t, dir, "tall.webp", webpLossless(2, 31))
	writeBytes(t, dir, "doc.pdf", pdf)
	ts := mediaTools(t, dir, &tools.MediaOptions{
		MaxImageBytes: int64(len(big) - 1),
		MaxPDFBytes:   int64(len(pdf) - 1),
		MaxImageSide:  25,
	})
	tests := []struct{ path, want string }{
		{"big.png", "big.png is a PNG image of "},
		{"big.png", "more than upload_media sends"},
		{"doc.pdf", "doc.pdf is a PDF document of "},
		{"doc.pdf", "for a PDF)"},
		{"wide.png", "wide.png is 30x2 pixels, more than upload_media sends (25 pixels wide or high)"},
		{"tall.webp", "tall.webp is 2x31 pixels"},
	}
	for _, tt := range tests {
		_, err := upload(t, ts, tt.path)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v, want %q", tt.path, err, tt.want)
		}
	}
	// At the cap exactly, files pass.
	ts = mediaTools(t, dir, &tools.MediaOptions{MaxImageBytes: int64(len(big)), MaxPDFBytes: int64(len(pdf)), MaxImageSide: 300})
	for _, p := range []string{"big.png", "doc.pdf", "wide.png", "tall.webp"} {
		if _, err := upload(t, ts, p); err != nil {
			t.Errorf("%s at the cap: %v", p, err)
		}
	}
	// The default caps are in the description.
	def, _ := mediaTools(t, dir, nil).Lookup("upload_media")
	for _, w := range []string{"Images may be up to 3.75 MiB and 8000 pixels wide or high, PDFs up to 20 MiB", "PNG, JPEG, GIF and WebP images and PDF documents"} {
		if !strings.Contains(def.Description, w) {
			t.Errorf("description %q lacks %q", def.Description, w)
		}
	}
	if strings.Contains(def.Description, dir) {
		t.Errorf("the description names the directory: %q", def.Description)
	}
}

// TestUploadMediaBigFile checks that a file over the caps is refused
// without being read: the refusal comes from its size.
func TestUploadMediaBigFile(t *testing.T) {
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "huge.png"))
	if err != nil {
		t.Fatal(err)
	}
	f.Write(pngBytes(t, 4, 4))
	if err := f.Truncate(64 << 30); err != nil { // sparse: takes no disk
		f.Close()
		t.Skip("no sparse files:", err)
	}
	f.Close()
	start := time.Now()
	_, err = upload(t, mediaTools(t, dir, nil), "huge.png")
	if err == nil || !strings.Contains(err.Error(), "huge.png is a PNG image of 65536 MiB, more than upload_media sends (3.75 MiB for an image)") {
		t.Errorf("got %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v: the file was read", d)
	}
}

func TestUploadMediaFIFO(t *testing.T) {
	dir := t.TempDir()
	if err := mkfifo(filepath.Join(dir, "pipe.png")); err != nil {
		t.Skip("mkfifo:", err)
	}
	ts := mediaTools(t, dir, nil)
	done := make(chan error, 1)
	go func() {
		_, err := upload(t, ts, "pipe.png")
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "pipe.png is not a regular file") {
			t.Errorf("got %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("upload_media blocked on a FIFO")
	}
}

func TestUploadMediaSpec(t *testing.T) {
	def, _ := mediaTools(t, t.TempDir(), nil).Lookup("upload_media")
	if !def.Concurrent || def.RequiresApproval {
		t.Errorf("Concurrent %v, RequiresApproval %v; want a concurrent tool without approval", def.Concurrent, def.RequiresApproval)
	}
	var schema struct {
		Properties map[string]any `json:"properties"`
		Required   []string       `json:"required"`
	}
	if err := json.Unmarshal(def.InputSchema, &schema); err != nil {
		t.Fatal(err)
	}
	if len(schema.Properties) != 1 || schema.Properties["path"] == nil || len(schema.Required) != 1 || schema.Required[0] != "path" {
		t.Errorf("schema %s, want one required path", def.InputSchema)
	}
	if _, err := tools.Media(filepath.Join(t.TempDir(), "missing"), nil); err == nil {
		t.Error("a missing directory was accepted")
	}
}

// TestWebPHeaders checks the WebP header reader on the lossy (VP8) form,
// which no encoder here writes: a key frame header with scaling bits set,
// which are not part of the size.
func TestWebPHeaders(t *testing.T) {
	vp8 := make([]byte, 10)
	vp8[0], vp8[1], vp8[2] = 0x10, 0x02, 0x00 // key frame tag
	vp8[3], vp8[4], vp8[5] = 0x9d, 0x01, 0x2a
	binary.LittleEndian.PutUint16(vp8[6:], 0x4000|640) // horizontal scale 1
	binary.LittleEndian.PutUint16(vp8[8:], 0x8000|480)
	w, h, err := tools.WebPSize(riff("VP8 ", vp8))
	if err != nil || w != 640 || h != 480 {
		t.Errorf("VP8: %dx%d, %v; want 640x480", w, h, err)
	}
	vp8[5] = 0
	if _, _, err := tools.WebPSize(riff("VP8 ", vp8)); err == nil || !strings.Contains(err.Error(), "no start code") {
		t.Errorf("VP8 without start code: %v", err)
	}
	if _, _, err := tools.WebPSize(riff("ALPH", make([]byte, 12))); err == nil || !strings.Contains(err.Error(), `first chunk is "ALPH"`) {
		t.Errorf("unknown chunk: %v", err)
	}
	lossless := vp8lSolid(3, 3, color.NRGBA{A: 0xff})
	lossless[0] = 0x2e
	if _, _, err := tools.WebPSize(riff("VP8L", lossless)); err == nil || !strings.Contains(err.Error(), "no signature") {
		t.Errorf("VP8L without signature: %v", err)
	}
}

// upload_media judges the file it opened, not the path it looked at: a FIFO
// swapped in meanwhile is refused at once instead of waited on, and a file
// with another hard link (perhaps to one outside the directory) is refused.
func TestUploadMediaSwapsAndHardLinks(t *testing.T) {
	dir := t.TempDir()
	if err := mkfifo(filepath.Join(dir, "probe")); err != nil {
		t.Skip("mkfifo:", err)
	}
	ts := mediaTools(t, dir, nil)
	path := filepath.Join(dir, "chart.png")
	writeBytes(t, dir, "chart.png", pngBytes(t, 4, 4))
	swapped := false
	tools.SetBeforeOpen(t, func(rel string) {
		if rel != "chart.png" || swapped {
			return
		}
		swapped = true
		os.Remove(path)
		if err := mkfifo(path); err != nil {
			t.Error(err)
		}
	})
	done := make(chan error, 1)
	go func() {
		_, err := upload(t, ts, "chart.png")
		done <- err
	}()
	select {
	case err := <-done:
		if !swapped || err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("swapped %v, err %v", swapped, err)
		}
	case <-time.After(20 * time.Second):
		// A watchdog, not a measure: on the old code the open waits for
		// a writer for ever.
		unblockFIFO(path)
		t.Fatal("upload_media blocked on a FIFO swapped in after the check")
	}

	outside := t.TempDir()
	secret := filepath.Join(outside, "secret.png")
	if err := os.WriteFile(secret, pngBytes(t, 4, 4), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(secret, filepath.Join(dir, "innocent.png")); err != nil {
		t.Skip("link:", err)
	}
	if _, err := upload(t, ts, "innocent.png"); err == nil || !strings.Contains(err.Error(), "innocent.png has 2 hard links") {
		t.Errorf("a hard-linked file was sent: %v", err)
	}
	if _, err := upload(t, mediaTools(t, dir, &tools.MediaOptions{AllowHardLinks: true}), "innocent.png"); err != nil {
		t.Errorf("allowed hard link refused: %v", err)
	}
}
