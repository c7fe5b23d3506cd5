package session

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/hrns-dev/hrns/internal/rawjson"
)

// Bounds of registered entries.
const (
	maxSkillFiles      = 100
	maxSkillFileBytes  = 256 << 10
	maxSkillFilesBytes = 2 << 20
	maxSkillPath       = 255
	maxEntryRefs       = 64 // entries of environments, skills, subagents, tools
	maxInlineDepth     = 3  // inline subagents within inline subagents
	maxEnvironmentID   = 255
	maxPageChars       = 1_000_000 // a browser's page_chars (browser.MaxPageChars)
)

// The bounds of the registries' operations (entries per key, lookups,
// resolved bytes) are in package platform/registry.

// entryName is the format of agent and skill names: lowercase ASCII
// letters, digits and hyphens, starting and ending with a letter or
// digit, at most 63 characters a segment, with an optional "org/" prefix.
var entryName = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?/)?[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$`)
})

// toolNameRE is the format of the API's tool names.
var toolNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`) })

var uuidFormat = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
})

// decodeObject decodes a JSON object into v, reporting a body that is not
// one, or a field of the wrong type, as a validation error at loc.
func decodeObject(raw []byte, v any, loc ...any) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return &ValidationError{Fields: []FieldError{{Loc: loc, Msg: "Input should be an object", Type: "model_type"}}}
	}
	if err := json.Unmarshal(raw, v); err != nil {
		if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok && te.Field != "" {
			l := append([]any{}, loc...)
			for _, f := range strings.Split(te.Field, ".") {
				l = append(l, f)
			}
			return &ValidationError{Fields: []FieldError{{Loc: l, Msg: "Input should be of type " + jsonType(te.Type.Kind().String()), Type: "type_error"}}}
		}
		return &ValidationError{Fields: []FieldError{{Loc: loc, Msg: "JSON decode error: " + err.Error(), Type: "json_invalid"}}}
	}
	return nil
}

func jsonType(goKind string) string {
	switch goKind {
	case "string":
		return "string"
	case "bool":
		return "boolean"
	case "int", "int64", "float64":
		return "number"
	case "slice":
		return "array"
	case "map", "struct":
		return "object"
	}
	return goKind
}

func at(loc []any, more ...any) []any { return append(append([]any{}, loc...), more...) }

// checkName validates an agent's or skill's name.
func checkName(v *validation, name string, loc ...any) {
	switch {
	case name == "":
		v.add("Field required", loc...)
	case !entryName().MatchString(name):
		v.add("name must be lowercase ASCII letters, digits and hyphens, start and end with a letter or digit, at most 63 characters, with an optional single 'org/' prefix", loc...)
	}
}

// checkEnvironmentID validates an environment's id: any text of 1 to 255
// bytes without control characters or surrounding spaces.
func checkEnvironmentID(v *validation, id string, loc ...any) {
	switch {
	case id == "":
		v.add("Field required", loc...)
	case len(id) > maxEnvironmentID:
		v.add(fmt.Sprintf("id must be at most %d bytes", maxEnvironmentID), loc...)
	case !utf8.ValidString(id) || strings.ContainsFunc(id, unicode.IsControl) || strings.TrimSpace(id) != id:
		v.add("id must be text without control characters or surrounding spaces", loc...)
	default:
		// The id is a URL path's end: /api/v2/environments/ID.
		for _, seg := range strings.Split(id, "/") {
			if seg == "" || seg == "." || seg == ".." {
				v.add("id must not start or end with /, nor have empty, . or .. segments", loc...)
				break
			}
		}
	}
}

// validateSkill checks a skill.
func validateSkill(v *validation, s *SkillSpec, loc ...any) {
	checkName(v, s.Name, at(loc, "name")...)
	if s.Description == "" {
		v.add("Field required", at(loc, "description")...)
	}
	if s.Body == "" {
		v.add("Field required", at(loc, "body")...)
	}
	if s.URLPattern != nil && (len(*s.URLPattern) < 1 || len(*s.URLPattern) > 1024) {
		v.add("url_pattern must have 1 to 1024 characters", at(loc, "url_pattern")...)
	}
	if len(s.Files) > maxSkillFiles {
		v.add(fmt.Sprintf("a skill has at most %d files", maxSkillFiles), at(loc, "files")...)
		return
	}
	total := 0
	for p, content := range s.Files {
		floc := at(loc, "files", p)
		if msg := checkSkillPath(p); msg != "" {
			v.add(msg, floc...)
			continue
		}
		if len(content) > maxSkillFileBytes {
			v.add(fmt.Sprintf("a file of a skill has at most %d bytes", maxSkillFileBytes), floc...)
		}
		if !utf8.ValidString(content) || strings.IndexByte(content, 0) >= 0 {
			v.add("files are text: valid UTF-8 without NUL bytes", floc...)
		}
		total += len(content)
	}
	if total > maxSkillFilesBytes {
		v.add(fmt.Sprintf("the files of a skill have at most %d bytes in all", maxSkillFilesBytes), at(loc, "files")...)
	}
	// Two paths where one is a folder of the other cannot both be files.
	for p := range s.Files {
		if checkSkillPath(p) != "" {
			continue // reported above; path.Dir of an absolute path never reaches "."
		}
		for dir := path.Dir(p); dir != "." && dir != "/"; dir = path.Dir(dir) {
			if _, clash := s.Files[dir]; clash {
				v.add(fmt.Sprintf("%s is a file and a folder of %s", dir, p), at(loc, "files", p)...)
			}
		}
	}
}

// checkSkillPath says what is wrong with the path of a skill's file, or
// returns "".
func checkSkillPath(p string) string {
	switch {
	case p == "":
		return "a file's path is empty"
	case len(p) > maxSkillPath:
		return fmt.Sprintf("a file's path has at most %d bytes", maxSkillPath)
	case !utf8.ValidString(p) || strings.ContainsFunc(p, unicode.IsControl):
		return "a file's path must be text without control characters"
	case strings.HasPrefix(p, "/") || strings.Contains(p, `\`) || (len(p) > 1 && p[1] == ':'):
		return "a file's path must be relative, with / between folders"
	case p == "SKILL.md":
		return "SKILL.md is the skill's body: set body instead"
	}
	for _, seg := range strings.Split(p, "/") {
		switch seg {
		case "":
			return "a file's path has an empty segment (// or a trailing /)"
		case ".", "..":
			return "a file's path must not contain . or .. segments"
		}
		if strings.HasPrefix(seg, ".") {
			return "a file's path must not contain hidden (dot) segments"
		}
	}
	return ""
}

// environment kinds of the API.
const (
	envWeb         = "web"
	envDesktop     = "desktop"
	envWorkstation = "workstation"
	envAndroid     = "android"
)

// validateEnvironment checks an environment and normalises it: Kind set,
// the fields of a browser dropped from a desktop.
func validateEnvironment(v *validation, e *EnvironmentSpec, loc ...any) {
	checkEnvironmentID(v, e.ID, at(loc, "id")...)
	e.ReadOnly = false
	switch e.Kind {
	case "", envWeb:
		e.Kind = envWeb
		switch e.Host {
		case "", "cloud", "user_device":
		default:
			v.add("Input should be 'user_device' or 'cloud'", at(loc, "host")...)
		}
		validateMode(v, e.Mode, at(loc, "mode")...)
		if e.PageChars != nil && (*e.PageChars < 1 || *e.PageChars > maxPageChars) {
			v.add(fmt.Sprintf("Input should be from 1 to %d", maxPageChars), at(loc, "page_chars")...)
		}
		for _, f := range []struct {
			name string
			val  *string
		}{{"vault_id", e.VaultID}, {"browser_profile_id", e.BrowserProfileID}} {
			if f.val != nil && !uuidFormat().MatchString(*f.val) {
				v.add("Input should be a valid UUID", at(loc, f.name)...)
			}
		}
		useDefault := e.UseDefaultBrowserProfile != nil && *e.UseDefaultBrowserProfile
		if useDefault && e.BrowserProfileID != nil {
			v.add("use_default_browser_profile and browser_profile_id are mutually exclusive", at(loc, "use_default_browser_profile")...)
		}
		if e.PersistBrowserProfile != nil && *e.PersistBrowserProfile && !useDefault && e.BrowserProfileID == nil {
			v.add("persist_browser_profile requires browser_profile_id or use_default_browser_profile", at(loc, "persist_browser_profile")...)
		}
		validateNetwork(v, e.Network, at(loc, "network")...)
	case envDesktop:
		switch e.Host {
		case "":
			v.add("Field required", at(loc, "host")...)
		case "user_device":
		default:
			v.add("Input should be 'user_device'", at(loc, "host")...)
		}
		*e = EnvironmentSpec{ID: e.ID, Kind: e.Kind, Host: e.Host, SessionID: e.SessionID, MCPServers: e.MCPServers}
	case envWorkstation:
		switch e.Host {
		case "", "cloud", "user_device":
		default:
			v.add("Input should be 'user_device' or 'cloud'", at(loc, "host")...)
		}
		*e = EnvironmentSpec{ID: e.ID, Kind: e.Kind, Host: e.Host, SessionID: e.SessionID, Lazy: e.Lazy, MCPServers: e.MCPServers}
	case envAndroid:
		*e = EnvironmentSpec{ID: e.ID, Kind: e.Kind, SessionID: e.SessionID, Image: e.Image, Lazy: e.Lazy, MCPServers: e.MCPServers}
	default:
		v.add("Input tag '"+e.Kind+"' found using 'kind' does not match any of the expected tags: 'web', 'desktop', 'android', 'workstation'", at(loc, "kind")...)
	}
	validateMCPServers(v, e.MCPServers, at(loc, "mcp_servers")...)
}

// validateMode checks a browser's mode: null, or {"type": "visual"} with
// width, height and markdown, or {"type": "text"} with chunk_size.
func validateMode(v *validation, raw json.RawMessage, loc ...any) {
	if rawjson.IsNull(raw) {
		return
	}
	if t, ok := rawjson.String(raw); ok {
		switch t {
		case "visual", "multimodal", "text":
		default:
			v.add("Input should be 'visual', 'multimodal' or 'text'", loc...)
		}
		return
	}
	var m struct {
		Type      string `json:"type"`
		Width     *int   `json:"width"`
		Height    *int   `json:"height"`
		Markdown  *bool  `json:"markdown"`
		ChunkSize *int   `json:"chunk_size"`
	}
	if err := decodeObject(raw, &m, loc...); err != nil {
		v.fields = append(v.fields, err.(*ValidationError).Fields...)
		return
	}
	positive := func(name string, n *int) {
		if n != nil && *n <= 0 {
			v.add("Input should be greater than 0", at(loc, name)...)
		}
	}
	switch m.Type {
	case "visual", "multimodal", "":
		positive("width", m.Width)
		positive("height", m.Height)
	case "text":
		positive("chunk_size", m.ChunkSize)
	default:
		v.add("Input tag '"+m.Type+"' found using 'type' does not match any of the expected tags: 'visual', 'multimodal', 'text'", at(loc, "type")...)
	}
}

// validateNetwork checks a browser's network settings.
func validateNetwork(v *validation, raw json.RawMessage, loc ...any) {
	if rawjson.IsNull(raw) {
		return
	}
	var n struct {
		ProxyURL     *string         `json:"proxy_url"`
		ManagedProxy json.RawMessage `json:"managed_proxy"`
	}
	if err := decodeObject(raw, &n, loc...); err != nil {
		v.fields = append(v.fields, err.(*ValidationError).Fields...)
		return
	}
	if rawjson.IsNull(n.ManagedProxy) {
		return
	}
	if n.ProxyURL != nil {
		v.add("proxy_url and managed_proxy are mutually exclusive", loc...)
	}
	var mp struct {
		Country *string `json:"country"`
		Sticky  *bool   `json:"sticky"`
		Pool    *string `json:"pool"`
	}
	if err := decodeObject(n.ManagedProxy, &mp, at(loc, "managed_proxy")...); err != nil {
		v.fields = append(v.fields, err.(*ValidationError).Fields...)
		return
	}
	if mp.Pool != nil {
		switch *mp.Pool {
		case "residential", "datacenter", "isp", "mobile":
		default:
			v.add("Input should be 'residential', 'datacenter', 'isp' or 'mobile'", at(loc, "managed_proxy", "pool")...)
		}
	}
}

// validateAgent checks an agent and the inline definitions it holds.
// References by name are not looked up here (see [Manager.ResolveAgent]).
func validateAgent(v *validation, a *AgentSpec, depth int, loc ...any) {
	a.ReadOnly = false
	checkName(v, a.Name, at(loc, "name")...)
	if a.Description == "" {
		v.add("Field required", at(loc, "description")...)
	}
	if a.Environments == nil {
		v.add("Field required", at(loc, "environments")...)
	}
	refList(v, a.Environments, at(loc, "environments"), func(i int, raw json.RawMessage, eloc []any) {
		if id, ok := rawjson.String(raw); ok {
			checkEnvironmentID(v, id, eloc...)
			return
		}
		var e EnvironmentSpec
		if err := decodeObject(raw, &e, eloc...); err != nil {
			v.fields = append(v.fields, err.(*ValidationError).Fields...)
			return
		}
		validateEnvironment(v, &e, eloc...)
		a.Environments[i], _ = json.Marshal(e)
	})
	refList(v, a.Skills, at(loc, "skills"), func(i int, raw json.RawMessage, sloc []any) {
		if name, ok := rawjson.String(raw); ok {
			checkName(v, name, sloc...)
			return
		}
		var s SkillSpec
		if err := decodeObject(raw, &s, sloc...); err != nil {
			v.fields = append(v.fields, err.(*ValidationError).Fields...)
			return
		}
		validateSkill(v, &s, sloc...)
		a.Skills[i], _ = json.Marshal(s)
	})
	refList(v, a.Subagents, at(loc, "subagents"), func(i int, raw json.RawMessage, sloc []any) {
		if name, ok := rawjson.String(raw); ok {
			checkName(v, name, sloc...)
			return
		}
		if depth >= maxInlineDepth {
			v.add(fmt.Sprintf("inline subagents nest at most %d deep; register the deeper ones and name them", maxInlineDepth), sloc...)
			return
		}
		var sub AgentSpec
		if err := decodeObject(raw, &sub, sloc...); err != nil {
			v.fields = append(v.fields, err.(*ValidationError).Fields...)
			return
		}
		validateAgent(v, &sub, depth+1, sloc...)
		a.Subagents[i], _ = json.Marshal(sub)
	})
	if !rawjson.IsNull(a.AnswerFormat) {
		if s := bytes.TrimSpace(a.AnswerFormat); s[0] != '{' {
			v.add("Input should be an object", at(loc, "answer_format")...)
		}
	} else {
		a.AnswerFormat = nil
	}
	if len(a.Tools) > maxEntryRefs {
		v.add(fmt.Sprintf("at most %d tools", maxEntryRefs), at(loc, "tools")...)
	}
	seen := map[string]bool{}
	for i, t := range a.Tools {
		tloc := at(loc, "tools", i)
		switch {
		case !toolNameRE().MatchString(t.Name):
			v.add("tool name must be 1 to 64 letters, digits or underscores, starting with a letter or underscore", at(tloc, "name")...)
		case seen[t.Name]:
			v.add(fmt.Sprintf("tool %q is declared twice", t.Name), at(tloc, "name")...)
		}
		seen[t.Name] = true
		if t.Description == "" {
			v.add("Field required", at(tloc, "description")...)
		}
		if !rawjson.IsNull(t.InputSchema) && bytes.TrimSpace(t.InputSchema)[0] != '{' {
			v.add("Input should be an object", at(tloc, "input_schema")...)
		}
	}
	if a.ReasoningEffort != nil {
		if err := checkReasoningEffort(*a.ReasoningEffort); err != nil {
			v.add(err.Error(), at(loc, "reasoning_effort")...)
		}
	}
	if a.MaxSteps != nil && *a.MaxSteps < 1 {
		v.add("Input should be greater than or equal to 1", at(loc, "max_steps")...)
	}
}

// refList checks the length of a list of references and calls each for
// every entry.
func refList(v *validation, list []json.RawMessage, loc []any, each func(i int, raw json.RawMessage, loc []any)) {
	if len(list) > maxEntryRefs {
		v.add(fmt.Sprintf("at most %d entries", maxEntryRefs), loc...)
		return
	}
	for i, raw := range list {
		if rawjson.IsNull(raw) {
			v.add("Input should be a name or an object", at(loc, i)...)
			continue
		}
		each(i, raw, at(loc, i))
	}
}
