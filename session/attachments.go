package session

import (
	"errors"
	"io/fs"
	"mime"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/hrns-dev/hrns/api"
	"github.com/hrns-dev/hrns/store"
)

// Bounds of the files the agent leaves for the user (AttachmentEvents of
// origin "agent").
const (
	// MaxAgentAttachments bounds the files of one session reported as
	// the agent's.
	MaxAgentAttachments = 100
	// maxAttachmentsPerScan bounds the AttachmentEvents one commit
	// carries (a tool call's, or the one that ends or parks the run);
	// more wait for the next.
	maxAttachmentsPerScan = 10
	// maxFilesScanned bounds the entries of the files folder read after
	// a call.
	maxFilesScanned = 1000
)

// fileMark is what the state remembers of a file of the files folder
// already reported (by the user's message or as the agent's): its size
// and modification time, so that a file the agent writes again is
// reported again.
type fileMark struct {
	Size int64 `json:"size"`
	Mod  int64 `json:"mod"`
}

// scanFiles lists the regular files at the top of the session's files
// folder (not hidden, not a download in progress), at most
// maxFilesScanned entries read; nil when there is no folder. complete is
// false when entries were left unread.
func (m *Manager) scanFiles(dir string) (marks map[string]fileMark, complete bool) {
	if dir == "" {
		return nil, true
	}
	parent, err := os.OpenRoot(filepath.Dir(dir))
	if err != nil {
		return nil, true
	}
	defer parent.Close()
	root, err := parent.OpenRoot(filepath.Base(dir))
	if err != nil {
		return nil, true
	}
	defer root.Close()
	f, err := root.Open(".")
	if err != nil {
		return nil, true
	}
	defer f.Close()
	entries, err := f.ReadDir(maxFilesScanned)
	complete = err == nil && len(entries) < maxFilesScanned || errors.Is(err, fs.ErrNotExist)
	marks = map[string]fileMark{}
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".crdownload") || checkFileName(name) != "" {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		marks[name] = fileMark{Size: info.Size(), Mod: info.ModTime().UnixNano()}
	}
	return marks, complete
}

// agentFiles returns the AttachmentEvents (origin "agent") of the files
// of marks, the files folder as a call left it, that st does not know
// as they are, and records them in st: new files, and files written
// again. Files st knows that are gone are forgotten (when marks is
// complete), so that a file made again is reported again.
func (m *Manager) agentFiles(id string, st *state, marks map[string]fileMark, complete bool) []store.Event {
	if marks == nil {
		return nil
	}
	if complete {
		for name := range st.Files {
			if _, ok := marks[name]; !ok {
				delete(st.Files, name)
			}
		}
	}
	var events []store.Event
	for _, name := range sortedKeys(marks) {
		mk := marks[name]
		if old, ok := st.Files[name]; ok && old == mk {
			continue
		}
		if st.AgentFiles >= MaxAgentAttachments || len(events) >= maxAttachmentsPerScan || len(st.Files) >= maxFilesScanned {
			break
		}
		if st.Files == nil {
			st.Files = map[string]fileMark{}
		}
		st.Files[name] = mk
		st.AgentFiles++
		mt := mime.TypeByExtension(path.Ext(name))
		if mt == "" {
			mt = "application/octet-stream"
		}
		events = append(events, event(api.EventAttachment, api.AttachmentData{Origin: "agent", Name: name, Path: filesDir + "/" + name,
			MediaType: mt, SizeBytes: mk.Size, URL: m.fileURL(id, name)}))
	}
	return events
}

// knowFiles records in st the files of the user's messages, saved as
// marks says, so that they are not reported as the agent's.
func knowFiles(st *state, marks map[string]fileMark) {
	for name, mk := range marks {
		if st.Files == nil {
			st.Files = map[string]fileMark{}
		}
		if len(st.Files) < maxFilesScanned {
			st.Files[name] = mk
		}
	}
}

// markOf is the fileMark of a file saved in root.
func markOf(root *os.Root, name string) (fileMark, bool) {
	info, err := root.Stat(path.Join(filesDir, name))
	if err != nil {
		return fileMark{}, false
	}
	return fileMark{Size: info.Size(), Mod: info.ModTime().UnixNano()}, true
}

// leftFiles scans the session's files folder as the run leaves it, for
// the commit that ends the run with an answer or parks it (waiting for
// tool results, an approval, a child session): a download that finished
// after the agent's last tool call, or a file written since, is reported
// there, as the agent's, within the bounds of a call's scan. The
// returned func gives the commit's AttachmentEvents and records them in
// st (see agentFiles); the scan is done before, out of the commit.
func (g *segment) leftFiles() func(st *state) []store.Event {
	marks, complete := g.m.scanFiles(g.m.filesFolder(g.sp, g.id))
	return func(st *state) []store.Event {
		return g.m.agentFiles(g.id, st, marks, complete)
	}
}
