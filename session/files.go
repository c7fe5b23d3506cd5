package session

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/hrns-dev/hrns/api"
	"github.com/hrns-dev/hrns/internal/netpolicy"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/store"
)

// Bounds of the files attached to user messages (the reference's: up to
// 10 files, 7 MB in total).
const (
	// MaxFilesPerMessage bounds the files of one message.
	MaxFilesPerMessage = 10
	// MaxFilesBytes bounds the bytes of the files of one request, all
	// its messages together.
	MaxFilesBytes = 7_000_000
	// maxFileName bounds a file's name, in bytes.
	maxFileName = 255
	// fileFetchTimeout bounds the fetching of a request's URL files.
	fileFetchTimeout = 30 * time.Second
	// filesDir is the directory of a workspace the files are saved in.
	filesDir = "files"
)

// ErrFilesTooLarge: the files of a request pass [MaxFilesBytes]. The
// server answers 413; nothing of the request is kept.
var ErrFilesTooLarge = errors.New("files too large")

// errNoWorkspaces: files came to a manager without Options.Workspaces.
const noWorkspaces = "this server keeps no session files, so it takes no files (hrns serve needs --workdir)"

// attached is a file of a message, checked and read, not saved yet.
type attached struct {
	name, mediaType string
	data            []byte
}

// prepareFiles checks and reads the files of msgs (decoding base64,
// fetching URLs under the address policy), within the bounds. Errors: a
// *ValidationError at the file's place, or one wrapping
// ErrFilesTooLarge. Nothing is saved.
func (m *Manager) prepareFiles(ctx context.Context, msgs []UserMessage, loc ...any) ([][]attached, error) {
	some := false
	for _, um := range msgs {
		some = some || len(um.Files) > 0
	}
	if !some {
		return nil, nil
	}
	var v validation
	out := make([][]attached, len(msgs))
	left := int64(MaxFilesBytes)
	var fetch *http.Client
	defer func() {
		if fetch != nil {
			fetch.CloseIdleConnections()
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, fileFetchTimeout)
	defer cancel()
	for i, um := range msgs {
		mloc := append(append([]any{}, loc...), i, "files")
		if len(um.Files) == 0 {
			continue
		}
		if m.opts.Workspaces == "" {
			v.add(noWorkspaces, mloc...)
			continue
		}
		if len(um.Files) > MaxFilesPerMessage {
			v.add(fmt.Sprintf("at most %d files a message (%d given)", MaxFilesPerMessage, len(um.Files)), mloc...)
			continue
		}
		for j, f := range um.Files {
			floc := append(append([]any{}, mloc...), j)
			if msg := checkFileName(f.Name); msg != "" {
				v.add(msg, append(floc, "name")...)
				continue
			}
			if f.MediaType != "" {
				if _, _, err := mime.ParseMediaType(f.MediaType); err != nil {
					v.add(fmt.Sprintf("media_type %q is not a MIME type", f.MediaType), append(floc, "media_type")...)
					continue
				}
			}
			var data []byte
			switch f.Type {
			case "", "base64":
				if int64(base64.StdEncoding.DecodedLen(len(f.Source))) > left+3 {
					return nil, fmt.Errorf("%w: the files of a request may hold %d bytes in all", ErrFilesTooLarge, MaxFilesBytes)
				}
				var err error
				if data, err = base64.StdEncoding.DecodeString(f.Source); err != nil {
					v.add("source is not standard base64: "+err.Error(), append(floc, "source")...)
					continue
				}
			case "url":
				if fetch == nil {
					fetch = m.fileClient()
				}
				var err error
				data, err = fetchFile(ctx, fetch, f.Source, left)
				if errors.Is(err, ErrFilesTooLarge) {
					return nil, err
				}
				if err != nil {
					v.add(err.Error(), append(floc, "source")...)
					continue
				}
			default:
				v.add(fmt.Sprintf("Input should be 'base64' or 'url' (got %q)", f.Type), append(floc, "type")...)
				continue
			}
			if len(data) == 0 {
				// An empty image would reach the model as an image of
				// no bytes, which fails each of the session's steps.
				v.add("the file is empty: a file must hold at least one byte", append(floc, "source")...)
				continue
			}
			if int64(len(data)) > left {
				return nil, fmt.Errorf("%w: the files of a request may hold %d bytes in all", ErrFilesTooLarge, MaxFilesBytes)
			}
			left -= int64(len(data))
			if f.SizeBytes != nil && *f.SizeBytes != int64(len(data)) {
				v.add(fmt.Sprintf("size_bytes is %d, the file has %d bytes", *f.SizeBytes, len(data)), append(floc, "size_bytes")...)
				continue
			}
			out[i] = append(out[i], attached{name: f.Name, mediaType: mediaTypeOf(f.Name, f.MediaType, data), data: data})
		}
	}
	if err := v.err(); err != nil {
		return nil, err
	}
	return out, nil
}

// checkFileName says what is wrong with a file's name, or "".
func checkFileName(name string) string {
	switch {
	case name == "":
		return "Field required: a file needs a name"
	case len(name) > maxFileName:
		return fmt.Sprintf("a file's name has at most %d bytes", maxFileName)
	case !utf8.ValidString(name):
		return "a file's name must be UTF-8"
	case name == "." || name == "..":
		return fmt.Sprintf("%q is not a file's name", name)
	case strings.ContainsAny(name, `/\`):
		return "a file's name has no directory: no / or \\"
	case strings.HasPrefix(name, "."):
		return "a file's name may not start with '.'"
	case strings.TrimSpace(name) != name:
		return "a file's name may not start or end with spaces"
	}
	for _, r := range name {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return fmt.Sprintf("a file's name may not hold the character %U", r)
		}
	}
	return ""
}

// mediaTypeOf is the given media type, else the name's, else the bytes'.
func mediaTypeOf(name, given string, data []byte) string {
	if given != "" {
		return given
	}
	if t := mime.TypeByExtension(path.Ext(name)); t != "" {
		return t
	}
	return http.DetectContentType(data)
}

// fileClient is the HTTP client of URL files: every connection under the
// address policy (Options.FileFetchAllow opens more), no proxy, at most
// 3 redirects.
func (m *Manager) fileClient() *http.Client {
	dialer := &net.Dialer{Timeout: 10 * time.Second, Control: netpolicy.Control(m.opts.FileFetchAllow)}
	return &http.Client{
		Transport: &http.Transport{DialContext: dialer.DialContext, TLSHandshakeTimeout: 10 * time.Second, ResponseHeaderTimeout: 15 * time.Second},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 3 {
				return errors.New("more than 3 redirects")
			}
			if err := checkFileURL(req.URL); err != nil {
				return err
			}
			return nil
		},
	}
}

func checkFileURL(u *url.URL) error {
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("only http and https URLs are fetched, not %q", u.Scheme)
	}
	if u.User != nil {
		return errors.New("a URL with credentials is not fetched")
	}
	return netpolicy.CheckHost(u.Hostname())
}

// fetchFile gets a URL file, reading at most left bytes of it.
func fetchFile(ctx context.Context, c *http.Client, raw string, left int64) ([]byte, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("source is not a URL: %v", err)
	}
	if err := checkFileURL(u); err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		// The caller is an API key: told why, not the address the URL's
		// name resolved to (a DNS oracle of the deployment's names).
		if text, ok := netpolicy.Describe(err); ok {
			return nil, fmt.Errorf("fetching %s: %s", u.Redacted(), text)
		}
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err // its URL is the one named, with its query
		}
		return nil, fmt.Errorf("fetching %s: %v", u.Redacted(), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetching %s: the server answered %s", u.Redacted(), resp.Status)
	}
	if resp.ContentLength > left {
		return nil, fmt.Errorf("%w: %s has %d bytes, more than the %d the request has left", ErrFilesTooLarge, u.Redacted(), resp.ContentLength, left)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, left+1))
	if err != nil {
		return nil, fmt.Errorf("fetching %s: %v", u.Redacted(), err)
	}
	if int64(len(data)) > left {
		return nil, fmt.Errorf("%w: %s has more than the %d bytes the request has left", ErrFilesTooLarge, u.Redacted(), left)
	}
	return data, nil
}

// saveFiles saves a message's files into the workspace name, under
// files/ (a name already there gets " (2)", " (3)"... before its
// extension), and returns the message's parts that show them to the
// model, their AttachmentEvents for the session id, and their marks (for
// state.Files: not the agent's files). The workspace
// is opened as an os.Root: nothing is written outside it, whatever its
// links.
func (m *Manager) saveFiles(id, workspace string, files []attached) ([]llm.Part, []store.Event, []FileContent, map[string]fileMark, error) {
	if len(files) == 0 {
		return nil, nil, nil, nil, nil
	}
	dir := filepath.Join(m.opts.Workspaces, workspace)
	if err := os.MkdirAll(m.opts.Workspaces, 0o700); err != nil {
		return nil, nil, nil, nil, err
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, nil, nil, nil, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	defer root.Close()
	if err := root.Mkdir(filesDir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, nil, nil, nil, err
	}
	var text strings.Builder
	text.WriteString("Files attached to this message, saved in your workspace's files folder (a browser's browser_file_upload takes them by these paths too):")
	var media []llm.Part
	var events []store.Event
	var shown []FileContent
	marks := map[string]fileMark{}
	for _, f := range files {
		name, err := createUnique(root, f.name, f.data)
		if err != nil {
			return nil, nil, nil, nil, fmt.Errorf("saving the file %q: %w", f.name, err)
		}
		p := filesDir + "/" + name
		if mk, ok := markOf(root, name); ok {
			marks[name] = mk
		}
		fmt.Fprintf(&text, "\n- %s (%s, %d bytes", p, f.mediaType, len(f.data))
		base, _, _ := mime.ParseMediaType(f.mediaType)
		switch {
		case postedImageType(base):
			// Its bytes decide: an image the provider cannot read
			// stays a file of the workspace, not shown as an image.
			if t, why := attachedImage(f.data); t != "" {
				media = append(media, llm.Part{Kind: llm.PartImage, Media: &llm.Media{MIMEType: t, Data: f.data, Name: name}})
			} else {
				fmt.Fprintf(&text, "; not shown to you as an image: %s", why)
			}
		case base == "application/pdf":
			if ok, why := attachedPDF(f.data); ok {
				media = append(media, llm.DocumentPart(base, name, f.data))
			} else {
				fmt.Fprintf(&text, "; not shown to you as a PDF: %s", why)
			}
		}
		text.WriteString(")")
		u := m.fileURL(id, name)
		size := int64(len(f.data))
		events = append(events, event(api.EventAttachment, api.AttachmentData{Origin: "user", Name: name, Path: p, MediaType: f.mediaType, SizeBytes: size, URL: u}))
		shown = append(shown, FileContent{Type: "url", Source: u, Name: name, MediaType: f.mediaType, SizeBytes: &size})
	}
	if len(media) > 0 {
		text.WriteString("\nThe images and PDFs among them follow.")
	}
	return append([]llm.Part{llm.TextPart(text.String())}, media...), events, shown, marks, nil
}

// fileURL is the URL that serves the file files/name of session id:
// absolute from Options.PublicURL, or a path from the server's root
// without one.
func (m *Manager) fileURL(id, name string) string {
	return strings.TrimRight(m.opts.PublicURL, "/") + "/api/v2/sessions/" + id + "/resources/files/" + filesDir + "/" + url.PathEscape(name)
}

// createUnique writes data to files/NAME in root, a new file, NAME made
// unique with " (k)" before its extension when taken; it returns the name
// used.
func createUnique(root *os.Root, name string, data []byte) (string, error) {
	ext := path.Ext(name)
	stem := strings.TrimSuffix(name, ext)
	for k := 1; k <= 100; k++ {
		n := name
		if k > 1 {
			n = fmt.Sprintf("%s (%d)%s", stem, k, ext)
			if len(n) > maxFileName {
				n = fmt.Sprintf("file (%d)%s", k, ext)
			}
		}
		f, err := root.OpenFile(filesDir+"/"+n, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		_, werr := io.Copy(f, bytes.NewReader(data))
		cerr := f.Close()
		if err := errors.Join(werr, cerr); err != nil {
			root.Remove(filesDir + "/" + n)
			return "", err
		}
		return n, nil
	}
	return "", fmt.Errorf("100 files named like %q already", name)
}

// workspaceOf is the name of the workspace of session id whose spec is
// sp (see [Manager.WorkspaceName]).
func workspaceOf(sp *spec, id string) string {
	for _, ref := range sp.toolsets() {
		if rest, ok := strings.CutPrefix(ref, "workspace:"); ok {
			if i := strings.LastIndexByte(rest, ':'); i >= 0 && rest[i+1:] != "" {
				return rest[i+1:]
			}
		}
	}
	return strings.ToLower(strings.ReplaceAll(id, "-", ""))
}
