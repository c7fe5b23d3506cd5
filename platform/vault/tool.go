package vault

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/hrns-dev/hrns/loop"
)

// ToolName is the name of the one-time code tool.
const ToolName = "one_time_code"

// CodeArgs are the arguments of a one_time_code call.
type CodeArgs struct {
	Entry string `json:"entry" jsonschema:"the name of the vault entry whose current code you need (for example the site or account the code is for)"`
	Vault string `json:"vault,omitempty" default:"" jsonschema:"the id of the vault holding the entry; needed only when several of your vaults have an entry of that name"`
}

// CodeResult is what a one_time_code call returns: the code, never the
// secret it is made from.
type CodeResult struct {
	Entry string `json:"entry"`
	Vault string `json:"vault"`
	Code  string `json:"code"`
	// ValidForS is how many seconds the code stays the current one.
	ValidForS int `json:"valid_for_s"`
}

// Tools returns the one_time_code tool of a session of owner that may use
// the vaults with the ids given: the agent names an entry and gets its
// current code. The vaults are read each call, so a token changed since
// (PUT /vaults/{id}/token) is the one used; a vault deleted since, or not
// the owner's, is not found. The tool never returns a secret, and its
// errors never quote one.
func (s *Service) Tools(owner string, vaultIDs []string) *loop.Toolset {
	ids := slices.Clone(vaultIDs)
	def := loop.NewTool(ToolName,
		"Gives the current one-time code (the 6 or 8 digits an authenticator app shows, RFC 6238 TOTP) of an entry "+
			"of the vaults this session may use, for a sign-in that asks for a two-factor code. Ask for it right "+
			"before you type it: a code changes every 30 seconds or so (valid_for_s says how long this one lasts; "+
			"when it is a few seconds, ask again once it has passed). The secret the code comes from is never shown.",
		func(ctx context.Context, in CodeArgs) (*CodeResult, error) {
			return s.toolCode(ctx, owner, ids, in)
		})
	def.Concurrent = true
	def.Access = loop.AccessRead
	return loop.MustToolset(def)
}

// toolCode is one_time_code's work.
func (s *Service) toolCode(ctx context.Context, owner string, ids []string, in CodeArgs) (*CodeResult, error) {
	if strings.TrimSpace(in.Entry) == "" {
		return nil, errors.New("entry is required: the name of the vault entry whose code you need")
	}
	search := ids
	if in.Vault != "" {
		in.Vault = strings.ToLower(strings.TrimSpace(in.Vault))
		if !slices.Contains(ids, in.Vault) {
			return nil, fmt.Errorf("vault %q is not one of this session's vaults (%s)", in.Vault, strings.Join(ids, ", "))
		}
		search = []string{in.Vault}
	}
	type match struct{ vault, entry string }
	var (
		found, folded []match
		entries       []string
	)
	for _, id := range search {
		names, err := s.Entries(ctx, owner, id)
		switch {
		case errors.Is(err, ErrNotFound):
			continue // deleted since the session started
		case err != nil:
			return nil, fmt.Errorf("vault %s: %v", id, err)
		}
		for _, n := range names {
			switch {
			case n == in.Entry:
				found = append(found, match{id, n})
			case strings.EqualFold(n, in.Entry):
				folded = append(folded, match{id, n})
			}
		}
		entries = append(entries, names...)
	}
	if len(found) == 0 && len(folded) == 1 {
		// "GitHub" for "github": one entry differs in case only.
		found = folded
	}
	switch len(found) {
	case 0:
		slices.Sort(entries)
		if len(entries) == 0 {
			return nil, fmt.Errorf("no vault entry %q: this session's vaults hold no entries", in.Entry)
		}
		return nil, fmt.Errorf("no vault entry %q (the entries are: %s)", in.Entry, strings.Join(slices.Compact(entries), ", "))
	case 1:
	default:
		var vaults []string
		for _, f := range found {
			vaults = append(vaults, f.vault)
		}
		return nil, fmt.Errorf("several vaults have an entry %q (%s): say which with the vault argument", in.Entry, strings.Join(vaults, ", "))
	}
	m := found[0]
	c, err := s.Code(ctx, owner, m.vault, m.entry)
	if err != nil {
		return nil, fmt.Errorf("vault %s: %v", m.vault, err)
	}
	return &CodeResult{Entry: m.entry, Vault: m.vault, Code: c.Code, ValidForS: int(c.ValidFor.Seconds())}, nil
}
