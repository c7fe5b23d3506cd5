package session

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
)

// Sealer encrypts the env and header values of MCP servers before they
// are stored (the session's request and state, registered environments
// and agents, schedules' templates): Seal encrypts under the primary key
// and says which; Open decrypts with the key named, so that values an
// older key sealed still open after a rotation, until
// [Manager.ReencryptMCPSecrets] seals them again under the primary key
// (the key the Seal of an empty value names). aad is bound to the
// ciphertext: Open fails with another. A *[vault.Keyring] is one; hrns
// serve gives its vault keys ([MCPServerOptions.Secrets]).
//
// [vault.Keyring]: https://pkg.go.dev/github.com/hrns-dev/hrns/platform/vault#Keyring
type Sealer interface {
	Seal(plaintext, aad []byte) (keyID string, ciphertext []byte, err error)
	Open(keyID string, ciphertext, aad []byte) ([]byte, error)
}

// sealedPrefix starts a sealed value: sealedPrefix KEYID ":" BASE64URL.
const sealedPrefix = "hrns-sealed:v1:"

// maxSealedValue bounds a sealed value: a value of maxMCPValue bytes,
// sealed and encoded, with its key id.
const maxSealedValue = maxMCPValue*4/3 + 256

// isSealed reports whether a stored value is sealed.
func isSealed(v string) bool { return strings.HasPrefix(v, sealedPrefix) }

// A sealing scope is what a sealed value is bound to: its owner (the API
// key) in definitions a key keeps (requests, registered entries,
// schedules), its session in the spec a session's runs mount. A value
// cannot be moved to another key's definitions or another session.
func ownerScope(owner string) string { return "owner\x00" + owner }
func sessionScope(id string) string  { return "session\x00" + id }

// mcpAAD binds a sealed value to its scope, server, field and name.
func mcpAAD(scope, server, field, name string) []byte {
	return []byte("hrns mcp secret v1\x00" + scope + "\x00" + server + "\x00" + field + "\x00" + name)
}

// errSecretsRefused is why a value is not stored without a keyring.
const errSecretsRefused = "MCP servers' env and headers values are secrets, and this server has no key to encrypt them at rest: its operator sets HRNS_VAULT_KEY or --vault-key-file (or allows plaintext with hrns serve --mcp-plaintext-secrets)"

// mcpSecrets returns the server's sealer (nil: none) and whether values
// may be stored in plaintext without one.
func (m *Manager) mcpSecrets() (Sealer, bool) {
	o := m.opts.MCPServers
	if o == nil {
		return nil, false
	}
	return o.Secrets, o.PlaintextSecrets
}

// sealValue returns val as it is stored in scope: sealed when the server
// has a sealer. A value already sealed is opened first: it must have been
// sealed in from (an owner's definition), and is sealed again in scope.
func (m *Manager) sealValue(from, scope, server, field, name, val string) (string, error) {
	s, plain := m.mcpSecrets()
	if isSealed(val) {
		p, err := m.openValue(from, server, field, name, val)
		if err != nil {
			return "", err
		}
		if from == scope {
			return val, nil
		}
		val = p
	}
	if s == nil {
		if !plain {
			return "", errors.New(errSecretsRefused)
		}
		return val, nil
	}
	id, ct, err := s.Seal([]byte(val), mcpAAD(scope, server, field, name))
	if err != nil {
		return "", fmt.Errorf("the value of %s of MCP server %q could not be encrypted: %w", name, server, err)
	}
	return sealedPrefix + id + ":" + base64.RawURLEncoding.EncodeToString(ct), nil
}

// openValue returns the plaintext of a value stored in scope; a value not
// sealed (stored before the server had keys, or with
// --mcp-plaintext-secrets) is its own plaintext. Its errors (an
// *undecryptableError) name the value and the key, never the bytes: the
// key is the operator's, and a tenant reads tenantError of them.
func (m *Manager) openValue(scope, server, field, name, val string) (string, error) {
	if !isSealed(val) {
		return val, nil
	}
	id, enc, _ := strings.Cut(strings.TrimPrefix(val, sealedPrefix), ":")
	s, _ := m.mcpSecrets()
	if s == nil {
		return "", &undecryptableError{fmt.Sprintf("the value of %s is encrypted (key %q), and this server has no vault keys to decrypt it", name, id)}
	}
	ct, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		return "", &undecryptableError{fmt.Sprintf("the value of %s is not a valid encrypted value", name)}
	}
	p, err := s.Open(id, ct, mcpAAD(scope, server, field, name))
	if err != nil {
		return "", &undecryptableError{fmt.Sprintf("the encrypted value of %s does not decrypt with this server's keys (key %q missing, or the value belongs to another key or session)", name, id)}
	}
	return string(p), nil
}

// An undecryptableError is why a stored value does not decrypt: its text,
// for the server's log, may name the operator's key; what a tenant reads
// of it is undecryptableText (tenantError).
type undecryptableError struct{ msg string }

func (e *undecryptableError) Error() string { return e.msg }

// undecryptableText is what a tenant reads of an *undecryptableError.
const undecryptableText = "its stored secrets could not be decrypted by this server; an operator must restore the key, or the definition must be saved again"

// secretRefused returns what the caller reads of err, why a value of a
// definition could not be stored (tenantError: a value that does not
// decrypt names no key), and logs err when its text differs.
func (m *Manager) secretRefused(err error) string {
	text := tenantError(err)
	if text != err.Error() {
		m.log.Warn("an MCP server's definition is refused", "err", err)
	}
	return text
}

// sealDoc returns doc, an owner's definition (a session request, a
// registered environment or agent, a schedule's template), with every
// env and header value of its mcp_servers entries sealed for the owner
// (see sealValue). A document without secrets is returned as it is.
func (m *Manager) sealDoc(owner string, doc json.RawMessage) (json.RawMessage, error) {
	if !bytes.Contains(doc, []byte(`"mcp_servers"`)) {
		return doc, nil
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return doc, nil // not a document: validation says why
	}
	changed, err := m.sealTree(owner, v, false)
	if err != nil || !changed {
		return doc, err
	}
	return json.Marshal(v)
}

// sealTree seals the values of the mcp_servers lists in v.
func (m *Manager) sealTree(owner string, v any, inServers bool) (bool, error) {
	changed := false
	switch x := v.(type) {
	case map[string]any:
		if inServers {
			name, _ := x["name"].(string)
			for _, f := range []string{"env", "headers"} {
				vals, _ := x[f].(map[string]any)
				for k, val := range vals {
					s, ok := val.(string)
					if !ok {
						continue
					}
					sealed, err := m.sealValue(ownerScope(owner), ownerScope(owner), name, f, k, s)
					if err != nil {
						return false, invalid(m.secretRefused(err), "body", "mcp_servers", name, f, k)
					}
					if sealed != s {
						vals[k] = sealed
						changed = true
					}
				}
			}
			return changed, nil
		}
		for k, val := range x {
			c, err := m.sealTree(owner, val, k == "mcp_servers")
			if err != nil {
				return false, err
			}
			changed = changed || c
		}
	case []any:
		for _, val := range x {
			c, err := m.sealTree(owner, val, inServers)
			if err != nil {
				return false, err
			}
			changed = changed || c
		}
	}
	return changed, nil
}

// sealSession seals the secrets of a new session id of owner before it
// is stored: its spec's servers for the session, its subagents'
// definitions and its request (returned) for the owner.
func (m *Manager) sealSession(owner, id string, sp *spec, request json.RawMessage) (json.RawMessage, error) {
	for i := range sp.MCPServers {
		s := &sp.MCPServers[i]
		for f, vals := range map[string]map[string]string{"env": s.Env, "headers": s.Headers} {
			if len(vals) == 0 {
				continue
			}
			sealed := make(map[string]string, len(vals))
			for k, val := range vals {
				out, err := m.sealValue(ownerScope(owner), sessionScope(id), s.Name, f, k, val)
				if err != nil {
					return nil, invalid(m.secretRefused(err), "body", "agent", "mcp_servers", s.Name, f, k)
				}
				sealed[k] = out
			}
			if f == "env" {
				s.Env = sealed
			} else {
				s.Headers = sealed
			}
		}
	}
	for i := range sp.Subagents {
		raw, err := m.sealDoc(owner, sp.Subagents[i].Agent)
		if err != nil {
			return nil, err
		}
		sp.Subagents[i].Agent = raw
	}
	return m.sealDoc(owner, request)
}

// checkSecrets says, before anything of a new session of owner is
// written (its files), why its MCP servers' values could not be stored:
// no key to seal them, or a sealed value that is not the owner's.
func (m *Manager) checkSecrets(owner string, sp *spec) error {
	for _, s := range sp.MCPServers {
		for f, vals := range map[string]map[string]string{"env": s.Env, "headers": s.Headers} {
			for _, k := range sortedKeys(vals) {
				if _, err := m.sealValue(ownerScope(owner), ownerScope(owner), s.Name, f, k, vals[k]); err != nil {
					return invalid(m.secretRefused(err), "body", "agent", "mcp_servers", s.Name, f, k)
				}
			}
		}
	}
	for _, sub := range sp.Subagents {
		if _, err := m.sealDoc(owner, sub.Agent); err != nil {
			return err
		}
	}
	return nil
}

// openServers returns the servers of session id with their values
// decrypted, and, apart, those whose values do not decrypt, with why.
func (m *Manager) openServers(id string, servers []MCPServer) (open []MCPServer, failed []mcpFailure) {
	for _, s := range servers {
		var err error
		decrypt := func(field string, vals map[string]string) map[string]string {
			if len(vals) == 0 || err != nil {
				return vals
			}
			out := make(map[string]string, len(vals))
			for k, val := range vals {
				if out[k], err = m.openValue(sessionScope(id), s.Name, field, k, val); err != nil {
					return nil
				}
			}
			return out
		}
		s.Env = decrypt("env", s.Env)
		s.Headers = decrypt("headers", s.Headers)
		if err != nil {
			m.log.Warn("an MCP server is left out of a run: its stored values do not decrypt", "session", id, "server", s.Name, "err", err)
			m.mcpHealth.leftOut(id)
			failed = append(failed, mcpFailure{Server: s.Name, Reason: tenantError(err)})
			continue
		}
		open = append(open, s)
	}
	return open, failed
}

// An mcpSecretsHealth counts, for the operator (GET /healthz), the MCP
// definitions whose stored values do not decrypt under this server's keys.
// Counting them at rest means reading every session's request and state
// (the scan of ReencryptMCPSecrets), too much for a health check: what is
// counted is what this process met, the sessions whose runs left a server
// out since it started, and the definitions the re-encryption at its start
// found, when it ran.
type mcpSecretsHealth struct {
	mu       sync.Mutex
	sessions map[string]struct{} // the sessions of runs that left a server out, up to maxCountedSessions
	beyond   int                 // runs that left a server out once the set was full
	atStart  *MCPReencryption    // the re-encryption's, when it ran
}

// maxCountedSessions bounds the sessions mcpSecretsHealth tells apart: past
// it, each run that leaves a server out counts once more (a session run
// again may count twice), so that a key retired too early on a large
// server does not grow the set with every session it breaks.
const maxCountedSessions = 10000

func (h *mcpSecretsHealth) leftOut(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.sessions == nil {
		h.sessions = map[string]struct{}{}
	}
	if _, ok := h.sessions[id]; ok {
		return
	}
	if len(h.sessions) >= maxCountedSessions {
		h.beyond++
		return
	}
	h.sessions[id] = struct{}{}
}

// MCPSecretsHealth is what [Manager.MCPSecretsHealth] counts: numbers
// only, never a key or a value.
type MCPSecretsHealth struct {
	// SessionsSinceStart counts the sessions whose runs on this process,
	// since it started, left an MCP server out because its stored values
	// do not decrypt. Past 10,000 sessions, each such run counts once
	// more, so that the count stays bounded in memory.
	SessionsSinceStart int `json:"undecryptable_sessions_since_start"`
	// AtStart counts the sessions, registered agents and environments
	// and schedules that the re-encryption at start
	// ([Manager.ReencryptMCPSecrets]) found holding values that do not
	// decrypt (MCPReencryption.Undecryptable); nil when it did not run
	// (hrns serve runs it only during a rotation, with two keys or more).
	AtStart *int `json:"undecryptable_definitions_at_start,omitempty"`
}

// MCPSecretsHealth counts the MCP definitions whose stored env and
// headers values this process found it cannot decrypt (see
// [MCPSecretsHealth]), for the operator.
func (m *Manager) MCPSecretsHealth() MCPSecretsHealth {
	h := &m.mcpHealth
	h.mu.Lock()
	defer h.mu.Unlock()
	out := MCPSecretsHealth{SessionsSinceStart: len(h.sessions) + h.beyond}
	if h.atStart != nil {
		n := h.atStart.Undecryptable
		out.AtStart = &n
	}
	return out
}
