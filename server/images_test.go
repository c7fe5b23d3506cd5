package server_test

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"image"
	"image/color"
	"image/gif"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/session"
)

// TestMalformedImagesRefused: every door an image or a file comes in by
// (a new session's messages and files, a message's images and files, a
// client tool's result) refuses an empty, blank, undecodable, mistyped
// or oversized one over real HTTP: 422 at the field (413 for a body past
// its limit), and nothing else is lost: no session is created, the
// session's events, status and pending calls stay as they were, no file
// is written, and a sound request is taken afterwards.
func TestMalformedImagesRefused(t *testing.T) {
	const look = `{"name":"a","tools":[{"name":"look","description":"Looks."}],"environments":[]}`
	e, ws := filesEnv(t, nil)
	png := pngOf(t, color.RGBA{0, 0, 255, 255})
	good := base64.StdEncoding.EncodeToString(png)
	gif := base64.StdEncoding.EncodeToString([]byte("GIF89a\x01\x00\x01\x00\x00\x00\x00;"))
	// A PNG header of 9000x4 pixels: more than a side may have.
	wide := append([]byte(nil), png...)
	binary.BigEndian.PutUint32(wide[16:20], 9000)
	binary.BigEndian.PutUint32(wide[29:33], crc32.ChecksumIEEE(wide[12:29])) // IHDR's CRC
	huge := strings.Repeat("A", (8<<20)/3*4+8)                               // 8 MiB and more, decoded
	dataURI := func(typ, payload string) string { return "data:" + typ + ";base64," + payload }
	images := []struct {
		name, image string
		status      int
		msg         string
	}{
		{"empty", dataURI("image/png", ""), 422, "the image is empty"},
		{"blank", dataURI("image/png", "   "), 422, "the image is empty"},
		{"newlines only", dataURI("image/png", "\r\n"), 422, "the image is empty"},
		{"whitespace instead of an image", "   ", 422, "base64 data URI"},
		{"empty string", "", 422, "base64 data URI"},
		{"not base64", dataURI("image/png", "!!!!"), 422, "not base64"},
		{"no comma", "data:image/png;base64", 422, "base64 data URI"},
		{"not base64 encoded", "data:image/png," + good, 422, "base64 data URI"},
		{"not an image type", dataURI("text/plain", b64("hi")), 422, "base64 data URI"},
		{"an image type no model takes", dataURI("image/svg+xml", b64("<svg/>")), 422, "image/png, image/jpeg, image/gif or image/webp"},
		{"bytes of another type", dataURI("image/png", gif), 422, "the image's bytes are not image/png"},
		{"cut short", dataURI("image/png", good[:24]), 422, "not a sound image/png"},
		{"too wide", dataURI("image/png", base64.StdEncoding.EncodeToString(wide)), 422, "9000x4"},
		{"too many bytes", dataURI("image/png", huge), 422, "at most 8388608 bytes"},
	}
	sessions := func() int {
		var p struct{ Total int }
		e.expect(e.do("GET", "/api/v2/sessions", keyAlice, nil), http.StatusOK).json(&p)
		return p.Total
	}
	events := func(id string) string {
		return string(e.expect(e.do("GET", "/api/v2/sessions/"+id+"/events?limit=1000", keyAlice, nil), http.StatusOK).body)
	}
	files := func() []string {
		m, _ := filepath.Glob(filepath.Join(ws, "*", "files", "*"))
		return m
	}
	refused := func(r *response, status int, loc, msg string) {
		t.Helper()
		if r.status != status || status == 422 && !hasDetail(r.body, loc, msg) {
			t.Errorf("status %d, want %d with %q at %s: %.300s", r.status, status, msg, loc, r.body)
		}
	}

	// A session waiting for its first message, and one waiting for the
	// result of a call of its client tool.
	idle := e.create(keyAlice, `{"agent":`+look+`,"idle_timeout_s":600}`)
	e.model.Push(calls(openaitest.ToolCall("call_1", "look", `{}`)))
	waiting := e.create(keyAlice, `{"agent":`+look+`,"messages":"Look."}`)
	fw := e.follow(keyAlice, waiting)
	fw.status(session.StatusAwaitingToolResults)
	n0, idleEvents, waitingEvents := sessions(), events(idle), events(waiting)

	for _, c := range images {
		img, _ := json.Marshal(c.image)
		t.Run("create/"+c.name, func(t *testing.T) {
			r := e.do("POST", "/api/v2/sessions", keyAlice, `{"agent":`+look+`,"messages":{"message":"look","images":[`+string(img)+`]}}`)
			refused(r, c.status, "body.messages.0.images.0", c.msg)
		})
		t.Run("message/"+c.name, func(t *testing.T) {
			r := e.do("POST", "/api/v2/sessions/"+idle+"/messages", keyAlice, `{"message":"look","images":["`+dataURI("image/png", good)+`",`+string(img)+`]}`)
			refused(r, c.status, "body.messages.0.images.1", c.msg)
		})
	}
	sources := []struct {
		name, source string
		status       int
		msg, result  string // what a file and a result are told
	}{
		{"empty", "", 422, "the file is empty", "the image is empty"},
		{"newlines only", "\n", 422, "the file is empty", "the image is empty"},
		{"blank", "   ", 422, "not standard base64", "must be base64"},
		{"not base64", "!!!!", 422, "not standard base64", "must be base64"},
		{"too many bytes", huge, 413, "", ""},
	}
	for _, c := range sources {
		src, _ := json.Marshal(c.source)
		t.Run("create file/"+c.name, func(t *testing.T) {
			r := e.do("POST", "/api/v2/sessions", keyAlice, `{"agent":`+look+`,"messages":{"message":"see","files":[{"source":`+string(src)+`,"name":"a.png"}]}}`)
			refused(r, c.status, "body.messages.0.files.0.source", c.msg)
		})
		t.Run("message file/"+c.name, func(t *testing.T) {
			r := e.do("POST", "/api/v2/sessions/"+idle+"/messages", keyAlice, `{"message":"see","files":[{"source":"`+good+`","name":"b.png"},{"source":`+string(src)+`,"name":"a.png"}]}`)
			refused(r, c.status, "body.messages.0.files.1.source", c.msg)
		})
		t.Run("result/"+c.name, func(t *testing.T) {
			r := e.do("POST", "/api/v2/sessions/"+waiting+"/tool_results", keyAlice, `{"kind":"tool_result","tool_req":{"tool_name":"look","id":"call_1"},"result":{"text":"Seen.","image":{"type":"base64","media_type":"image/png","source":`+string(src)+`}}}`)
			refused(r, c.status, "body.results.0.result.image", c.result)
		})
	}
	for _, typ := range []string{"text/plain", "image/svg+xml"} {
		t.Run("result/media type "+typ, func(t *testing.T) {
			r := e.do("POST", "/api/v2/sessions/"+waiting+"/tool_results", keyAlice, `{"kind":"tool_result","tool_req":{"tool_name":"look","id":"call_1"},"result":{"image":{"type":"base64","media_type":"`+typ+`","source":"`+good+`"}}}`)
			refused(r, 422, "body.results.0.result.image", "must be image/png, image/jpeg, image/gif or image/webp")
		})
	}

	// Nothing was lost or kept.
	if n := sessions(); n != n0 {
		t.Errorf("%d sessions after the refusals, %d before", n, n0)
	}
	if got := events(idle); got != idleEvents {
		t.Errorf("the idle session's events changed: %d bytes of them, %d before: %.2000s", len(got), len(idleEvents), got)
	}
	if got := events(waiting); got != waitingEvents {
		t.Errorf("the waiting session's events changed: %d bytes of them, %d before: %.2000s", len(got), len(waitingEvents), got)
	}
	if f := files(); len(f) != 0 {
		t.Errorf("files written: %v", f)
	}
	if p := fw.pending(); len(p) != 1 || p[0].ID != "call_1" {
		t.Errorf("pending %+v", p)
	}
	// Sound ones are taken.
	e.model.Push(openaitest.Reply{Text: "A blue square."}, openaitest.Reply{Text: "Blue."})
	e.expect(e.do("POST", "/api/v2/sessions/"+idle+"/messages", keyAlice, `{"message":"look","images":["`+dataURI("image/png", good)+`"],"files":[{"source":"`+good+`","name":"a.png"}]}`), http.StatusAccepted)
	e.follow(keyAlice, idle).status(session.StatusIdle)
	e.expect(e.do("POST", "/api/v2/sessions/"+waiting+"/tool_results", keyAlice, `{"kind":"tool_result","tool_req":{"tool_name":"look","id":"call_1"},"result":{"text":"Seen.","image":{"type":"base64","media_type":"image/png","source":"`+good+`"}}}`), http.StatusAccepted)
	fw.status(session.StatusCompleted)
	if f := files(); len(f) != 1 {
		t.Errorf("files written: %v", f)
	} else if b, _ := os.ReadFile(f[0]); string(b) != string(png) {
		t.Errorf("%s holds %q", f[0], b)
	}
}

// TestAttachedImagesChecked: a message's file that claims to be an image
// (by its name or its media_type) is shown to the model as an image only
// when its bytes are a sound one, of the type they are (a GIF named .jpg
// is shown as a GIF); one that is not (text named .png, a PNG cut short,
// a PNG too wide for the providers) is a workspace file like any other,
// saved and listed to the model with why it is not shown, and the
// session runs on. Base64 and URL files alike, over real HTTP.
func TestAttachedImagesChecked(t *testing.T) {
	text := []byte("hello, this is not a picture\n")
	sound := pngOf(t, color.RGBA{0, 0, 255, 255})
	wide := append([]byte(nil), sound...) // a PNG header of 9000x4 pixels
	binary.BigEndian.PutUint32(wide[16:20], 9000)
	binary.BigEndian.PutUint32(wide[29:33], crc32.ChecksumIEEE(wide[12:29]))
	var g bytes.Buffer
	if err := gif.Encode(&g, image.NewPaletted(image.Rect(0, 0, 2, 2), color.Palette{color.Black, color.White}), nil); err != nil {
		t.Fatal(err)
	}
	remote := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(text) }))
	defer remote.Close()
	remoteAddr := netip.MustParseAddrPort(strings.TrimPrefix(remote.URL, "http://"))
	e, ws := filesEnv(t, func(a netip.AddrPort) bool { return a == remoteAddr })

	for _, c := range []struct {
		name     string
		file     string // the file's JSON, but its source
		data     []byte // the file's bytes
		url      bool   // fetched from remote, not given in base64
		shownAs  string // the image's type shown to the model, "" when none
		whyNotIn string // what the model is told when it is not shown
	}{
		{"text named .png", `"name":"a.png"`, text, false, "", "not shown to you as an image: its bytes are not a PNG, JPEG, GIF or WebP image (they read as text/plain"},
		{"text typed image/webp", `"name":"a.bin","media_type":"image/webp"`, text, false, "", "its bytes are not a PNG, JPEG, GIF or WebP image"},
		{"PNG header cut short", `"name":"a.png"`, sound[:24], false, "", "not shown to you as an image: the image is not a sound image/png: unexpected EOF"},
		{"PNG too wide", `"name":"a.png"`, wide, false, "", "not shown to you as an image: an image must be 1 to at most 8000 pixels wide and high, not 9000x4"},
		{"GIF named .jpg", `"name":"a.jpg"`, g.Bytes(), false, "image/gif", ""},
		{"sound PNG", `"name":"a.png"`, sound, false, "image/png", ""},
		{"sound PNG typed image/png", `"name":"a.dat","media_type":"image/png"`, sound, false, "image/png", ""},
		{"URL: text named .png", `"type":"url","name":"a.png"`, text, true, "", "not shown to you as an image: its bytes are not a PNG"},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := base64.StdEncoding.EncodeToString(c.data)
			if c.url {
				src = remote.URL + "/a.png"
			}
			e.model.Push(openaitest.Reply{Text: "Seen."})
			n := len(e.model.Requests())
			id := e.create(keyAlice, fmt.Sprintf(`{"agent":{"name":"reader","environments":[]},"idle_timeout_s":60,"messages":{"message":"See.","files":[{%s,"source":%q}]}}`, c.file, src))
			e.follow(keyAlice, id).status(session.StatusIdle)
			var name string
			json.Unmarshal([]byte("{"+c.file+"}"), &struct{ Name *string }{&name})
			if got, err := os.ReadFile(filepath.Join(ws, strings.ReplaceAll(id, "-", ""), "files", name)); err != nil || !bytes.Equal(got, c.data) {
				t.Errorf("files/%s: %q, %v", name, got, err)
			}
			reqs := e.model.Requests()
			if len(reqs) != n+1 {
				t.Fatalf("%d requests to the model, want 1", len(reqs)-n)
			}
			req := string(reqs[n].Body)
			if !strings.Contains(req, "files/"+name) {
				t.Errorf("the model is not told of files/%s:\n%s", name, req)
			}
			if c.shownAs != "" {
				if !strings.Contains(req, `"image_url":{"url":"data:`+c.shownAs+`;base64,`+base64.StdEncoding.EncodeToString(c.data)) {
					t.Errorf("the model is not shown the file as %s:\n%.3000s", c.shownAs, req)
				}
			} else {
				if strings.Contains(req, `"image_url"`) {
					t.Errorf("the model is shown the file as an image:\n%.3000s", req)
				}
				if !strings.Contains(req, c.whyNotIn) {
					t.Errorf("the model is not told %q:\n%.3000s", c.whyNotIn, req)
				}
			}
		})
	}
}

// TestAttachedPDFsChecked: a message's file named or typed as a PDF is
// shown to the model as a document only when its bytes are a PDF's, whole
// (its header in the first KiB, its end-of-file marker in the last);
// text named .pdf, or a PDF cut short, was sent as a document part and
// the provider refused every step. It is now a workspace file like any
// other, listed to the model with why it is not shown, and the session
// runs on.
func TestAttachedPDFsChecked(t *testing.T) {
	sound := []byte("%PDF-1.4\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n2 0 obj << /Type /Pages /Kids [] /Count 0 >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n")
	e, ws := filesEnv(t, func(netip.AddrPort) bool { return false })
	for _, c := range []struct {
		name     string
		file     string
		data     []byte
		shown    bool
		whyNotIn string
	}{
		{"text named .pdf", `"name":"a.pdf"`, []byte("hello, this is not a document\n"), false, "not shown to you as a PDF: its bytes are not a PDF (they read as text/plain"},
		{"text typed application/pdf", `"name":"a.bin","media_type":"application/pdf"`, []byte("plain words\n"), false, "not shown to you as a PDF: its bytes are not a PDF"},
		{"PDF cut short", `"name":"a.pdf"`, sound[:40], false, "not shown to you as a PDF: the PDF is cut short"},
		{"sound PDF", `"name":"a.pdf"`, sound, true, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			e.model.Push(openaitest.Reply{Text: "Read."})
			n := len(e.model.Requests())
			id := e.create(keyAlice, fmt.Sprintf(`{"agent":{"name":"reader","environments":[]},"idle_timeout_s":60,"messages":{"message":"Read.","files":[{%s,"source":%q}]}}`, c.file, base64.StdEncoding.EncodeToString(c.data)))
			e.follow(keyAlice, id).status(session.StatusIdle)
			var name string
			json.Unmarshal([]byte("{"+c.file+"}"), &struct{ Name *string }{&name})
			if got, err := os.ReadFile(filepath.Join(ws, strings.ReplaceAll(id, "-", ""), "files", name)); err != nil || !bytes.Equal(got, c.data) {
				t.Errorf("files/%s: %q, %v", name, got, err)
			}
			reqs := e.model.Requests()
			if len(reqs) != n+1 {
				t.Fatalf("%d requests to the model, want 1", len(reqs)-n)
			}
			req := string(reqs[n].Body)
			doc := strings.Contains(req, `"type":"file"`)
			if c.shown {
				if !doc || !strings.Contains(req, base64.StdEncoding.EncodeToString(c.data)) {
					t.Errorf("the model is not shown the PDF:\n%.3000s", req)
				}
				return
			}
			if doc {
				t.Errorf("the model is shown the file as a document:\n%.3000s", req)
			}
			if !strings.Contains(req, c.whyNotIn) {
				t.Errorf("the model is not told %q:\n%.3000s", c.whyNotIn, req)
			}
		})
	}
}
