package server

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hrns-dev/hrns/browser/userdata"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store"
)

// ProfileOptions bound the browser profiles callers upload
// (/api/v2/browser-profiles). The zero value of a field means its
// default.
type ProfileOptions struct {
	// MaxArchiveBytes bounds an uploaded archive; beyond, the upload is
	// 413. 0 means 64 MiB.
	MaxArchiveBytes int64
	// Unpacked bounds what an archive unpacks to (files' bytes and
	// entries); beyond, complete-upload is 422. Zero fields mean
	// [userdata.Limits]'s defaults.
	Unpacked userdata.Limits
	// MaxPerKey bounds the profiles one API key keeps; 0 means 100.
	MaxPerKey int
	// MaxPendingPerKey bounds the uploads one key has initiated and not
	// completed (until they expire); 0 means 5.
	MaxPendingPerKey int
	// UploadTTL is how long an upload URL stays valid; 0 means 1 hour.
	UploadTTL time.Duration
	// MaxConcurrent bounds the uploads and completions this server
	// handles at once (each holds an archive in memory); 0 means 2.
	MaxConcurrent int
}

func (o ProfileOptions) withDefaults() ProfileOptions {
	if o.MaxArchiveBytes <= 0 {
		o.MaxArchiveBytes = 64 << 20
	}
	if o.MaxPerKey <= 0 {
		o.MaxPerKey = 100
	}
	if o.MaxPendingPerKey <= 0 {
		o.MaxPendingPerKey = 5
	}
	if o.UploadTTL <= 0 {
		o.UploadTTL = time.Hour
	}
	if o.MaxConcurrent <= 0 {
		o.MaxConcurrent = 2
	}
	return o
}

// profileRoutes adds the browser profile routes:
//
//	GET    /api/v2/browser-profiles                          list (limit, offset)
//	POST   /api/v2/browser-profiles/initiate-upload          a pending profile and its upload URL
//	POST   /api/v2/browser-profiles/{profile_id}/upload      the upload target: multipart form
//	                                                         (upload_fields, then file); no API key,
//	                                                         the token is the capability (204)
//	POST   /api/v2/browser-profiles/{profile_id}/complete-upload  validate and store (201)
//	GET    /api/v2/browser-profiles/default                  the default of browser_name (404 if none)
//	PUT    /api/v2/browser-profiles/{profile_id}/default     make it the default of its browser
//	DELETE /api/v2/browser-profiles/{profile_id}/default     unmark it
//	GET    /api/v2/browser-profiles/{profile_id}             one
//	DELETE /api/v2/browser-profiles/{profile_id}             204
//
// Profiles live in the store, so every replica finds them; a key sees
// only its own (another's is 404).
func (s *Server) profileRoutes() {
	s.popts = s.opts.Profiles.withDefaults()
	s.profileSlots = make(chan struct{}, s.popts.MaxConcurrent)
	for _, r := range []struct {
		pattern string
		body    body
		h       func(w http.ResponseWriter, r *http.Request, owner string) error
	}{
		{"GET /api/v2/browser-profiles", bodyNone, s.profileList},
		{"POST /api/v2/browser-profiles/initiate-upload", bodyIgnored, s.profileInitiate},
		{"POST /api/v2/browser-profiles/{profile_id}/complete-upload", bodyJSON, s.profileComplete},
		{"GET /api/v2/browser-profiles/default", bodyNone, s.profileDefault},
		{"PUT /api/v2/browser-profiles/{profile_id}/default", bodyIgnored, s.profileSetDefault(true)},
		{"DELETE /api/v2/browser-profiles/{profile_id}/default", bodyNone, s.profileSetDefault(false)},
		{"GET /api/v2/browser-profiles/{profile_id}", bodyNone, s.profileGet},
		{"DELETE /api/v2/browser-profiles/{profile_id}", bodyNone, s.profileDelete},
	} {
		s.mux.Handle(r.pattern, s.api(r.body, s.profileErrors(r.h)))
	}
	s.mux.HandleFunc("POST /api/v2/browser-profiles/{profile_id}/upload", s.profileUpload)
}

// profileErrors maps the store's errors of profiles.
func (s *Server) profileErrors(h func(w http.ResponseWriter, r *http.Request, owner string) error) func(w http.ResponseWriter, r *http.Request, owner string) error {
	return func(w http.ResponseWriter, r *http.Request, owner string) error {
		err := h(w, r, owner)
		switch {
		case errors.Is(err, store.ErrProfileNotFound):
			writeError(w, http.StatusNotFound, "Browser profile not found")
		default:
			return err
		}
		return nil
	}
}

// profileRead is the reference's BrowserProfileRead.
type profileRead struct {
	ID             string          `json:"id"`
	UserID         string          `json:"user_id"`
	OrgID          string          `json:"org_id"`
	Name           string          `json:"name"`
	Description    *string         `json:"description"`
	BrowserName    string          `json:"browser_name"`
	BrowserVersion string          `json:"browser_version"`
	S3Path         *string         `json:"s3_path"`
	FileSizeBytes  *int64          `json:"file_size_bytes"`
	Checksum       *string         `json:"checksum"`
	UsageCount     int64           `json:"usage_count"`
	LastUsedAt     *time.Time      `json:"last_used_at"`
	Labels         json.RawMessage `json:"labels"`
	IsDefault      bool            `json:"is_default"`
	CreatedAt      time.Time       `json:"created_at"`
	UpdatedAt      time.Time       `json:"updated_at"`
}

func readProfile(p *store.Profile) *profileRead {
	out := &profileRead{ID: p.ID, UserID: userID(p.Owner), OrgID: orgID(p.Owner), Name: p.Name, Description: p.Description,
		BrowserName: p.BrowserName, BrowserVersion: p.BrowserVersion, UsageCount: p.UsageCount, LastUsedAt: p.LastUsedAt,
		Labels: p.Labels, IsDefault: p.IsDefault, CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt}
	if p.Ready {
		size, sum := p.SizeBytes, p.Checksum
		out.FileSizeBytes, out.Checksum = &size, &sum
	}
	if out.Labels == nil {
		out.Labels = json.RawMessage("null")
	}
	return out
}

// userID is the reference's user_id of an owner: like [orgID], a UUID
// derived from the owner (hrns's users are API keys).
func userID(owner string) string { return orgID("user\x00" + owner) }

// profileID reads the path's profile_id: a UUID, in its canonical form.
func profileID(r *http.Request) (string, error) {
	raw := r.PathValue("profile_id")
	h := strings.ToLower(strings.ReplaceAll(raw, "-", ""))
	if !validUUID(raw) || len(h) != 32 {
		return "", &session.ValidationError{Fields: []session.FieldError{{Loc: []any{"path", "profile_id"}, Msg: "Input should be a valid UUID", Type: "uuid_parsing", Input: raw}}}
	}
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32], nil
}

func (s *Server) profileList(w http.ResponseWriter, r *http.Request, owner string) error {
	q := &query{r: r}
	limit := q.int("limit", 10, 1, 1000)
	offset := q.int("offset", 0, 0, 1<<30)
	if err := q.err(); err != nil {
		return err
	}
	page, total, err := s.m.Profiles().ListProfiles(r.Context(), &store.ProfileListParams{Owner: owner, Offset: offset, Limit: limit})
	if err != nil {
		return err
	}
	out := make([]*profileRead, len(page))
	for i, p := range page {
		out[i] = readProfile(p)
	}
	writeJSON(w, http.StatusOK, map[string]any{"total": total, "limit": limit, "offset": offset, "profiles": out})
	return nil
}

func (s *Server) profileGet(w http.ResponseWriter, r *http.Request, owner string) error {
	id, err := profileID(r)
	if err != nil {
		return err
	}
	p, err := s.m.Profiles().GetProfile(r.Context(), owner, id)
	if err != nil {
		return err
	}
	if !p.Ready {
		return store.ErrProfileNotFound // not a profile until its upload completes
	}
	writeJSON(w, http.StatusOK, readProfile(p))
	return nil
}

func (s *Server) profileDelete(w http.ResponseWriter, r *http.Request, owner string) error {
	id, err := profileID(r)
	if err != nil {
		return err
	}
	if err := s.m.Profiles().DeleteProfile(r.Context(), owner, id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) profileDefault(w http.ResponseWriter, r *http.Request, owner string) error {
	name := r.URL.Query().Get("browser_name")
	if name == "" {
		return &session.ValidationError{Fields: []session.FieldError{{Loc: []any{"query", "browser_name"}, Msg: "Field required", Type: "missing"}}}
	}
	p, err := s.m.Profiles().DefaultProfile(r.Context(), owner, name)
	if errors.Is(err, store.ErrProfileNotFound) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("No default browser profile for %q", name))
		return nil
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, readProfile(p))
	return nil
}

func (s *Server) profileSetDefault(on bool) func(w http.ResponseWriter, r *http.Request, owner string) error {
	return func(w http.ResponseWriter, r *http.Request, owner string) error {
		id, err := profileID(r)
		if err != nil {
			return err
		}
		p, err := s.m.Profiles().SetDefaultProfile(r.Context(), owner, id, on)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, readProfile(p))
		return nil
	}
}

// profileInitiate answers POST /api/v2/browser-profiles/initiate-upload:
// a pending profile, and where and how to upload its archive. The upload
// target is this server (POST upload_url, a multipart form of
// upload_fields and then the archive as "file", as a presigned S3 POST
// takes it); the token in upload_fields is the capability, valid for
// upload_expires_in seconds.
func (s *Server) profileInitiate(w http.ResponseWriter, r *http.Request, owner string) error {
	ctx := r.Context()
	now := s.now()
	st := s.m.Profiles()
	if _, err := st.DeleteExpiredUploads(ctx, now); err != nil {
		return err
	}
	ready, pending, err := st.CountProfiles(ctx, owner, now)
	if err != nil {
		return err
	}
	switch {
	case ready >= s.popts.MaxPerKey:
		writeError(w, http.StatusConflict, fmt.Sprintf("this API key keeps %d browser profiles, the most it may: delete some first", ready))
		return nil
	case pending >= s.popts.MaxPendingPerKey:
		writeError(w, http.StatusConflict, fmt.Sprintf("this API key has %d profile uploads in progress, the most it may: complete them or wait for them to expire", pending))
		return nil
	}
	var raw [32]byte
	rand.Read(raw[:])
	token := hex.EncodeToString(raw[:])
	sum := sha256.Sum256([]byte(token))
	id := newUUID()
	if _, err := st.CreateProfile(ctx, &store.Profile{ID: id, Owner: owner, UploadToken: sum[:], UploadExpires: now.Add(s.popts.UploadTTL)}); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"profile_id":        id,
		"upload_url":        s.publicBase(r) + "/api/v2/browser-profiles/" + id + "/upload",
		"upload_fields":     map[string]string{"token": token},
		"upload_expires_in": int(s.popts.UploadTTL / time.Second),
	})
	return nil
}

// newUUID returns a random (version 4) UUID.
func newUUID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// acquire takes one of the slots of profile uploads and completions,
// waiting until the request ends.
func (s *Server) acquire(r *http.Request) bool {
	select {
	case s.profileSlots <- struct{}{}:
		return true
	case <-r.Context().Done():
		return false
	}
}

func (s *Server) release() { <-s.profileSlots }

// profileUpload is the upload target of initiate-upload: a multipart form
// whose "token" field is the upload's token and whose "file" part is the
// archive (other fields are ignored). The archive is bounded by
// ProfileOptions.MaxArchiveBytes (413 beyond); it is checked by
// complete-upload. 204 when stored; 403 for a wrong or expired token, or
// a profile already completed.
func (s *Server) profileUpload(w http.ResponseWriter, r *http.Request) {
	id, err := profileID(r)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt != "multipart/form-data" {
		writeError(w, http.StatusUnsupportedMediaType, "the upload is a multipart/form-data form: the upload_fields, then the archive as the part named file")
		return
	}
	if !s.acquire(r) {
		return
	}
	defer s.release()
	const formOverhead = 1 << 20
	limitBody(w, r, s.popts.MaxArchiveBytes+formOverhead)
	mr, err := r.MultipartReader()
	if err != nil {
		writeError(w, http.StatusBadRequest, "not a multipart form: "+err.Error())
		return
	}
	var token string
	var archive []byte
	tooBig := func() {
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the profile archive is larger than %d bytes, the most this server takes (hrns serve --browser-profile-max-bytes)", s.popts.MaxArchiveBytes))
	}
	for n := 0; ; n++ {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			tooBig()
			return
		}
		if err != nil || n >= 64 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("a bad multipart form (%v)", cmpErr(err, "more than 64 parts")))
			return
		}
		switch part.FormName() {
		case "file":
			archive, err = io.ReadAll(io.LimitReader(part, s.popts.MaxArchiveBytes+1))
			if _, ok := errors.AsType[*http.MaxBytesError](err); ok || int64(len(archive)) > s.popts.MaxArchiveBytes {
				tooBig()
				return
			}
		case "token":
			b, rerr := io.ReadAll(io.LimitReader(part, 256))
			token, err = string(b), rerr
		default:
			_, err = io.Copy(io.Discard, io.LimitReader(part, 64<<10))
		}
		if err != nil {
			if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
				tooBig()
				return
			}
			writeError(w, http.StatusBadRequest, "reading the form: "+err.Error())
			return
		}
	}
	if archive == nil {
		writeError(w, http.StatusUnprocessableEntity, []session.FieldError{{Loc: []any{"body", "file"}, Msg: "Field required: the archive, as the form's part named file", Type: "missing"}})
		return
	}
	sum := sha256.Sum256([]byte(token))
	err = s.m.Profiles().PutProfileUpload(r.Context(), id, sum[:], s.now(), archive)
	if errors.Is(err, store.ErrProfileNotFound) {
		writeError(w, http.StatusForbidden, "the upload token is wrong or expired, or the profile's upload is complete: initiate another upload")
		return
	}
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func cmpErr(err error, def string) string {
	if err != nil {
		return err.Error()
	}
	return def
}

// browserNames are the browser_name values hrns takes: it runs Chromium.
var browserNames = []string{"chromium"}

// profileComplete answers POST .../{profile_id}/complete-upload: the
// uploaded archive is checked (see package userdata) and the profile is
// stored, ready, with the body's metadata (BrowserProfileCreate).
func (s *Server) profileComplete(w http.ResponseWriter, r *http.Request, owner string) error {
	id, err := profileID(r)
	if err != nil {
		return err
	}
	var in struct {
		Name           *string            `json:"name"`
		BrowserName    *string            `json:"browser_name"`
		BrowserVersion *string            `json:"browser_version"`
		Description    *string            `json:"description"`
		Labels         *map[string]string `json:"labels"`
	}
	if err := decode(r, &in); err != nil {
		return err
	}
	var fields []session.FieldError
	text := func(v *string, name string, max int, req bool) {
		switch {
		case v == nil && req:
			fields = append(fields, session.FieldError{Loc: []any{"body", name}, Msg: "Field required", Type: "missing"})
		case v == nil:
		case req && strings.TrimSpace(*v) == "":
			fields = append(fields, session.FieldError{Loc: []any{"body", name}, Msg: "String should have at least 1 character", Type: "string_too_short"})
		case len(*v) > max || !utf8.ValidString(*v):
			fields = append(fields, session.FieldError{Loc: []any{"body", name}, Msg: fmt.Sprintf("String should have at most %d bytes of UTF-8", max), Type: "string_too_long"})
		}
	}
	text(in.Name, "name", 255, true)
	text(in.BrowserName, "browser_name", 64, true)
	text(in.BrowserVersion, "browser_version", 64, true)
	text(in.Description, "description", 4096, false)
	if in.BrowserName != nil && *in.BrowserName != "" && !strings.EqualFold(*in.BrowserName, browserNames[0]) {
		fields = append(fields, session.FieldError{Loc: []any{"body", "browser_name"}, Type: "value_error",
			Msg: fmt.Sprintf("browser %q is not one hrns runs: use %q (a Chromium user-data directory)", *in.BrowserName, browserNames[0])})
	}
	var labels json.RawMessage
	if in.Labels != nil {
		if len(*in.Labels) > 64 {
			fields = append(fields, session.FieldError{Loc: []any{"body", "labels"}, Msg: "at most 64 labels", Type: "value_error"})
		}
		for k, v := range *in.Labels {
			if k == "" || len(k) > 128 || len(v) > 1024 {
				fields = append(fields, session.FieldError{Loc: []any{"body", "labels", k}, Msg: "a label's key has 1 to 128 bytes, its value at most 1024", Type: "value_error"})
			}
		}
		labels, _ = json.Marshal(*in.Labels)
	}
	if len(fields) > 0 {
		return &session.ValidationError{Fields: fields}
	}
	st := s.m.Profiles()
	p, err := st.GetProfile(r.Context(), owner, id)
	if err != nil {
		return err
	}
	if p.Ready {
		writeError(w, http.StatusConflict, "the profile's upload is already complete")
		return nil
	}
	if !s.acquire(r) {
		return r.Context().Err()
	}
	defer s.release()
	archive, err := st.ProfileArchive(r.Context(), owner, id)
	if err != nil {
		return err
	}
	if archive == nil {
		return &session.ValidationError{Fields: []session.FieldError{{Loc: []any{"path", "profile_id"}, Type: "value_error",
			Msg: "no archive was uploaded for this profile: POST it to the upload_url of initiate-upload first"}}}
	}
	if _, err := userdata.Check(archive, &s.popts.Unpacked); err != nil {
		if errors.Is(err, userdata.ErrRefused) {
			return &session.ValidationError{Fields: []session.FieldError{{Loc: []any{"body", "file"}, Msg: err.Error(), Type: "value_error"}}}
		}
		return err
	}
	sum := sha256.Sum256(archive)
	browser := strings.ToLower(*in.BrowserName)
	done, err := st.CompleteProfile(r.Context(), &store.Profile{ID: id, Owner: owner, Name: *in.Name, Description: in.Description,
		BrowserName: browser, BrowserVersion: *in.BrowserVersion, Labels: labels, SizeBytes: int64(len(archive)), Checksum: hex.EncodeToString(sum[:])}, archive)
	if errors.Is(err, store.ErrProfileNotFound) {
		// Deleted, completed, or uploaded again while it was checked.
		writeError(w, http.StatusConflict, "the profile's upload changed while it was checked (uploaded again, completed or deleted): complete it again")
		return nil
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, readProfile(done))
	return nil
}
