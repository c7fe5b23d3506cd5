package server

import (
	"cmp"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/tools"
)

// The session files operations (the reference's "Session Files"): each
// session has a workspace, the directory [Options.Workspaces]/NAME, where
// NAME is [session.Manager.WorkspaceName] (the directory its agent's file
// tools work in). Callers list, read and write it with the confinement of
// the file tools ([tools.Workspace]).

const (
	// maxReadFileBytes bounds the file read_file returns (base64 in
	// JSON: a third more on the wire).
	maxReadFileBytes = 10 << 20
	// maxResourceFileBytes bounds a file served as a resource.
	maxResourceFileBytes = 16 << 20
	// maxListEntries bounds max_entries of list_files.
	maxListEntries = 1000
	// resourceBucketFiles is the resources bucket of a session's
	// workspace files; the key is the file's path.
	resourceBucketFiles = "files"
)

// workspaceNameRE is the form of the names of workspaces.
var workspaceNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9a-f]{32}$`) })

// errNoWorkspaces: the server was started without Options.Workspaces.
var errNoWorkspaces = errors.New("this server keeps no session files (hrns serve needs --workdir for them)")

// workspace opens the workspace of the session of owner named by the
// request's path, making its directory (mode 0700) and the workspaces
// directory when missing, as the session's file tools do.
func (s *Server) workspace(r *http.Request, owner string) (*tools.Workspace, error) {
	name, err := s.m.WorkspaceName(r.Context(), owner, r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	if s.opts.Workspaces == "" {
		return nil, errNoWorkspaces
	}
	if !workspaceNameRE().MatchString(name) {
		return nil, fmt.Errorf("the session's workspace name %q is not 32 hex digits", name)
	}
	dir := filepath.Join(s.opts.Workspaces, name)
	// The workspaces directory too, as the sessions' file tools and a
	// message's files make it: a missing one was a 404 "File not found".
	if err := os.MkdirAll(s.opts.Workspaces, 0o700); err != nil {
		return nil, err
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, err
	}
	// The directory itself, not a link to elsewhere.
	if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("the session's workspace %s is not a directory (%v)", dir, err)
	}
	return tools.OpenWorkspace(dir, nil)
}

// filePath turns the path a caller gives into one relative to the
// workspace: "~" is the workspace itself (the reference's paths start
// there: "~/Downloads").
func filePath(p string) string {
	if p == "~" {
		return "."
	}
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		return rest
	}
	return p
}

// shownPath is the clean, slash-separated form of a path relative to the
// workspace, "." for the workspace itself.
func shownPath(p string) string {
	return path.Clean(strings.ReplaceAll(filePath(p), `\`, "/"))
}

// fileError answers the errors of a workspace: a missing file is 404, a
// refused path or file is 422 (loc body.path); others are the caller's.
func (s *Server) fileError(w http.ResponseWriter, err error) error {
	switch {
	case errors.Is(err, errNoWorkspaces):
		writeError(w, http.StatusNotImplemented, err.Error())
	case errors.Is(err, fs.ErrNotExist):
		writeError(w, http.StatusNotFound, "File not found")
	case errors.Is(err, tools.ErrBadPath), errors.Is(err, tools.ErrOutside), errors.Is(err, tools.ErrNotRegular),
		errors.Is(err, tools.ErrHardLinks), errors.Is(err, tools.ErrNotDir), errors.Is(err, tools.ErrTooLarge),
		errors.Is(err, fs.ErrPermission):
		writeError(w, http.StatusUnprocessableEntity, []session.FieldError{{Loc: []any{"body", "path"}, Msg: err.Error(), Type: "value_error"}})
	default:
		return err
	}
	return nil
}

// fileEntry is the reference's FileEntry.
type fileEntry struct {
	Name       string    `json:"name"`
	Path       string    `json:"path"`
	SizeBytes  int64     `json:"size_bytes"`
	ModifiedAt time.Time `json:"modified_at"`
	IsDir      bool      `json:"is_dir"`
}

// listFiles answers POST /api/v2/sessions/{id}/files/list_files: the
// entries of one directory, newest first (then by name), paged by the
// cursor of the last entry seen (modified_before, name_after).
func (s *Server) listFiles(w http.ResponseWriter, r *http.Request, owner string) error {
	var body struct {
		Path           *string    `json:"path"`
		MaxEntries     *int       `json:"max_entries"`
		ModifiedBefore *time.Time `json:"modified_before"`
		NameAfter      *string    `json:"name_after"`
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	limit := 500
	if body.MaxEntries != nil {
		if *body.MaxEntries < 1 {
			return &session.ValidationError{Fields: []session.FieldError{{Loc: []any{"body", "max_entries"}, Msg: "Input should be greater than or equal to 1", Type: "greater_than_equal", Input: *body.MaxEntries}}}
		}
		limit = min(*body.MaxEntries, maxListEntries)
	}
	dir := ""
	if body.Path != nil {
		dir = *body.Path
	}
	ws, err := s.workspace(r, owner)
	if err != nil {
		return s.fileError(w, err)
	}
	defer ws.Close()
	entries, complete, err := ws.List(r.Context(), filePath(dir))
	if err != nil {
		return s.fileError(w, err)
	}
	slices.SortFunc(entries, func(a, b tools.WorkspaceEntry) int {
		return cmp.Or(b.ModTime.Compare(a.ModTime), strings.Compare(a.Name, b.Name))
	})
	out := []fileEntry{}
	truncated := !complete
	for _, e := range entries {
		if body.ModifiedBefore != nil {
			c := e.ModTime.Compare(*body.ModifiedBefore)
			if c > 0 || c == 0 && (body.NameAfter == nil || e.Name <= *body.NameAfter) {
				continue
			}
		} else if body.NameAfter != nil && e.Name <= *body.NameAfter {
			continue
		}
		if len(out) == limit {
			truncated = true
			break
		}
		out = append(out, fileEntry{Name: e.Name, Path: e.Path, SizeBytes: e.Size, ModifiedAt: e.ModTime.UTC(), IsDir: e.IsDir})
	}
	writeJSON(w, http.StatusOK, map[string]any{"path": shownPath(dir), "files": out, "truncated": truncated})
	return nil
}

// filePathField reads the required path of a read_file or write_file
// body.
func filePathField(p *string) (string, error) {
	if p == nil {
		return "", &session.ValidationError{Fields: []session.FieldError{{Loc: []any{"body", "path"}, Msg: "Field required", Type: "missing"}}}
	}
	return *p, nil
}

// readFile answers POST /api/v2/sessions/{id}/files/read_file: a file's
// bytes in base64, up to 10 MiB.
func (s *Server) readFile(w http.ResponseWriter, r *http.Request, owner string) error {
	var body struct {
		Path *string `json:"path"`
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	name, err := filePathField(body.Path)
	if err != nil {
		return err
	}
	ws, err := s.workspace(r, owner)
	if err != nil {
		return s.fileError(w, err)
	}
	defer ws.Close()
	b, info, err := ws.ReadFile(filePath(name), maxReadFileBytes)
	if err != nil {
		return s.fileError(w, err)
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"path":           shownPath(name),
		"content_base64": base64.StdEncoding.EncodeToString(b),
		"size_bytes":     len(b),
		"modified_at":    info.ModTime().UTC(),
	})
	return nil
}

// writeFile answers POST /api/v2/sessions/{id}/files/write_file: creates
// or replaces a file with the decoded content_base64 (standard base64,
// padded), making missing parent directories.
func (s *Server) writeFile(w http.ResponseWriter, r *http.Request, owner string) error {
	var body struct {
		Path          *string `json:"path"`
		ContentBase64 *string `json:"content_base64"`
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	name, err := filePathField(body.Path)
	if err != nil {
		return err
	}
	if body.ContentBase64 == nil {
		return &session.ValidationError{Fields: []session.FieldError{{Loc: []any{"body", "content_base64"}, Msg: "Field required", Type: "missing"}}}
	}
	data, err := base64.StdEncoding.DecodeString(*body.ContentBase64)
	if err != nil {
		return &session.ValidationError{Fields: []session.FieldError{{Loc: []any{"body", "content_base64"}, Msg: "Invalid base64: " + err.Error(), Type: "value_error"}}}
	}
	ws, err := s.workspace(r, owner)
	if err != nil {
		return s.fileError(w, err)
	}
	defer ws.Close()
	if err := ws.WriteFile(filePath(name), data); err != nil {
		return s.fileError(w, err)
	}
	writeJSON(w, http.StatusOK, map[string]any{"path": shownPath(name), "size_bytes": len(data)})
	return nil
}

// resourceFile answers GET /api/v2/sessions/{id}/resources/files/{path}:
// a workspace file's bytes, up to 16 MiB. Images and PDFs are served as
// such, text as text/plain, anything else as an attachment of opaque
// bytes, all under the resources' nosniff and sandbox headers.
func (s *Server) resourceFile(w http.ResponseWriter, r *http.Request, owner string) error {
	name := r.PathValue("key")
	ws, err := s.workspace(r, owner)
	if err != nil {
		return s.fileError(w, err)
	}
	defer ws.Close()
	b, _, err := ws.ReadFile(name, maxResourceFileBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return session.ErrResourceNotFound // the reference's 404
	}
	if err != nil {
		return s.fileError(w, err)
	}
	h := w.Header()
	mt := fileMediaType(name)
	h.Set("Content-Type", mt)
	if mt == "application/octet-stream" {
		h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": path.Base(name)}))
	}
	h.Set("Content-Length", strconv.Itoa(len(b)))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	h.Set("Cache-Control", "private, no-store")
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write(b); err != nil && r.Context().Err() == nil {
		s.log.Debug("writing a file resource", "err", err)
	}
	return nil
}

// fileMediaType is the type a workspace file is served with, by its
// extension: images and PDFs as such, text as plain text; never a type a
// browser would run (HTML, SVG, JavaScript).
func fileMediaType(name string) string {
	switch strings.ToLower(path.Ext(name)) {
	case ".png":
		return "image/png"
	case ".jpg", ".jpeg":
		return "image/jpeg"
	case ".gif":
		return "image/gif"
	case ".webp":
		return "image/webp"
	case ".pdf":
		return "application/pdf"
	case ".txt", ".md", ".csv", ".log", ".json", ".yaml", ".yml", ".xml", ".go", ".py", ".js", ".ts", ".html", ".htm", ".css", ".svg", ".sh":
		return "text/plain; charset=utf-8"
	}
	return "application/octet-stream"
}
