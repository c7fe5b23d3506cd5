package session

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hrns-dev/hrns/store"
)

// A BrowserProfile is the browser profile (a Chromium user-data
// directory, uploaded through /api/v2/browser-profiles) that a session's
// web environment starts from: its browser_profile_id, or the owner's
// default profile when the entry says use_default_browser_profile. See
// [EnvironmentParams.Profile].
//
// The environment unpacks a copy of it for the session. What the
// session's browser changes in it (new cookies, storage) stays with that
// copy, unless the entry says persist_browser_profile: then Persist
// writes the copy back into the profile each time a run that started the
// browser stops (the session waits, yields, pauses or ends), so that the
// profile holds what the session's browser held when it last closed.
type BrowserProfile struct {
	// ID is the profile's id.
	ID string
	// Archive reads the profile's archive from the store and counts the
	// use (usage_count, last_used_at). It fails with an error wrapping
	// [ErrProfileGone] when the profile was deleted since the session
	// was created. Nil while a request is validated.
	Archive func(ctx context.Context) ([]byte, error)
	// Persist, set when the entry asks for persist_browser_profile (and
	// nil while a request is validated), replaces the profile's archive
	// with archive, which the environment made from the session's copy
	// and checked: in one write of the store, so that a crash leaves the
	// profile as it was, and only into the profile of the session's
	// owner. Of sessions writing the same profile, the last write wins
	// whole. It fails wrapping [ErrProfileGone] when the profile was
	// deleted: nothing is written then.
	Persist func(ctx context.Context, archive []byte) error
}

// ErrProfileGone is wrapped by the error of [BrowserProfile.Archive] when
// the profile no longer exists.
var ErrProfileGone = errors.New("the browser profile was deleted since the session was created")

// profileBrowser is the browser_name of the profiles hrns runs.
const profileBrowser = "chromium"

// bindProfiles resolves the browser profiles the agent's environments
// name, for owner: browser_profile_id must be one of the owner's ready
// profiles (another owner's is not found), and use_default_browser_profile
// takes the owner's default Chromium profile, if any (without one, the
// browser starts from a fresh profile). The profile chosen is recorded in
// the spec (Profiles), so that every run, on any replica, starts from the
// same one. Only environments the server gives each session
// ([Options.SessionEnvironments]) take profiles; for the others the
// fields are reported as not honoured.
func (m *Manager) bindProfiles(ctx context.Context, owner string, sp *spec) error {
	sp.Profiles = nil
	for _, kind := range sortedKeys(sp.EnvDefs) {
		if m.opts.SessionEnvironments[kind] == nil {
			continue
		}
		var fields map[string]json.RawMessage
		if json.Unmarshal(sp.EnvDefs[kind], &fields) != nil {
			continue // a bare kind
		}
		loc := []any{"body", "agent", "environments", kind}
		var def struct {
			ID         *string
			UseDefault *bool
			Persist    *bool
		}
		for _, f := range []struct {
			name string
			v    any
			want string
		}{
			{"browser_profile_id", &def.ID, "a valid UUID"},
			{"use_default_browser_profile", &def.UseDefault, "a valid boolean"},
			{"persist_browser_profile", &def.Persist, "a valid boolean"},
		} {
			if raw, ok := fields[f.name]; ok && json.Unmarshal(raw, f.v) != nil {
				return invalid("Input should be "+f.want, append(loc, f.name)...)
			}
		}
		useDefault := def.UseDefault != nil && *def.UseDefault
		switch {
		case useDefault && def.ID != nil:
			return invalid("use_default_browser_profile and browser_profile_id are mutually exclusive", append(loc, "use_default_browser_profile")...)
		}
		var p *store.Profile
		var err error
		switch {
		case def.ID != nil:
			if !vaultIDRE().MatchString(*def.ID) {
				return invalid("Input should be a valid UUID", append(loc, "browser_profile_id")...)
			}
			p, err = m.st.GetProfile(ctx, owner, strings.ToLower(*def.ID))
			if err == nil && !p.Ready {
				err = store.ErrProfileNotFound
			}
			if errors.Is(err, store.ErrProfileNotFound) {
				return invalid(fmt.Sprintf("browser profile %s not found: a session uses the profiles uploaded with its own API key (/api/v2/browser-profiles)", *def.ID), append(loc, "browser_profile_id")...)
			}
		case useDefault:
			p, err = m.st.DefaultProfile(ctx, owner, profileBrowser)
			if errors.Is(err, store.ErrProfileNotFound) {
				continue // no default: a fresh profile
			}
		default:
			if def.Persist != nil && *def.Persist {
				return invalid("persist_browser_profile writes the session's browser back into a profile: name one with browser_profile_id or use_default_browser_profile", append(loc, "persist_browser_profile")...)
			}
			continue
		}
		if err != nil {
			return err
		}
		if sp.Profiles == nil {
			sp.Profiles = map[string]string{}
		}
		ref := owner + "\x00" + p.ID
		if def.Persist != nil && *def.Persist {
			ref += "\x00persist"
		}
		sp.Profiles[kind] = ref
	}
	return nil
}

// browserProfile is the profile of the spec's environment kind for the
// session id (empty while validating), or nil.
func (m *Manager) browserProfile(sp *spec, kind, id string) *BrowserProfile {
	ref, ok := sp.Profiles[kind]
	if !ok {
		return nil
	}
	owner, pid, _ := strings.Cut(ref, "\x00")
	pid, persist, _ := strings.Cut(pid, "\x00")
	bp := &BrowserProfile{ID: pid}
	if id == "" {
		return bp
	}
	if persist == "persist" {
		bp.Persist = func(ctx context.Context, archive []byte) error {
			sum := sha256.Sum256(archive)
			_, err := m.st.SaveProfileArchive(ctx, owner, pid, archive, hex.EncodeToString(sum[:]), time.Now())
			if errors.Is(err, store.ErrProfileNotFound) {
				return fmt.Errorf("browser profile %s: %w", pid, ErrProfileGone)
			}
			if err != nil {
				return fmt.Errorf("browser profile %s: %w", pid, err)
			}
			m.log.Info("wrote a session's browser back into its profile", "profile", pid, "session", id, "bytes", len(archive))
			return nil
		}
	}
	bp.Archive = func(ctx context.Context) ([]byte, error) {
		p, err := m.st.GetProfile(ctx, owner, pid)
		if err == nil && !p.Ready {
			err = store.ErrProfileNotFound
		}
		if err == nil {
			var archive []byte
			if archive, err = m.st.ProfileArchive(ctx, owner, pid); err == nil {
				if err := m.st.UseProfile(ctx, owner, pid, time.Now()); err != nil && !errors.Is(err, store.ErrProfileNotFound) {
					m.log.Warn("counting a browser profile's use", "profile", pid, "session", id, "err", err)
				}
				return archive, nil
			}
		}
		if errors.Is(err, store.ErrProfileNotFound) {
			return nil, fmt.Errorf("browser profile %s: %w", pid, ErrProfileGone)
		}
		return nil, fmt.Errorf("browser profile %s: %w", pid, err)
	}
	return bp
}
