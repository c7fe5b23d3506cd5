package tools

import (
	"fmt"
	"path"
	"strings"
)

// glob is a compiled list_files pattern: slash-separated segments, each a
// path.Match pattern or "**", which matches any number of segments (none
// included).
type glob struct {
	segs []string
}

func compileGlob(pattern string) (*glob, error) {
	if strings.HasPrefix(pattern, "/") {
		return nil, fmt.Errorf("pattern %q must be relative to path", pattern)
	}
	var segs []string
	for _, s := range strings.Split(pattern, "/") {
		switch {
		case s == "" || s == ".":
			continue
		case s == "**":
			if len(segs) > 0 && segs[len(segs)-1] == "**" {
				continue
			}
		case strings.Contains(s, "**"):
			return nil, fmt.Errorf("pattern %q: ** must be a whole path segment, as in **/*.go", pattern)
		default:
			if _, err := path.Match(s, ""); err != nil {
				return nil, fmt.Errorf("pattern %q is not a valid glob: %v", pattern, err)
			}
		}
		segs = append(segs, s)
	}
	if len(segs) == 0 {
		segs = []string{"*"}
	}
	return &glob{segs: segs}, nil
}

// match reports whether the path made of name segments matches the pattern.
func (g *glob) match(name []string) bool { return matchSegs(g.segs, name) }

// couldMatchBelow reports whether a path under the directory made of dir
// segments could match: whether walking into it is useful.
func (g *glob) couldMatchBelow(dir []string) bool { return prefixSegs(g.segs, dir) }

func matchSegs(pat, name []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			rest := pat[1:]
			for i := 0; i <= len(name); i++ {
				if matchSegs(rest, name[i:]) {
					return true
				}
			}
			return false
		}
		if len(name) == 0 {
			return false
		}
		if ok, _ := path.Match(pat[0], name[0]); !ok {
			return false
		}
		pat, name = pat[1:], name[1:]
	}
	return len(name) == 0
}

// prefixSegs reports whether some path that extends dir by at least one
// segment could match pat.
func prefixSegs(pat, dir []string) bool {
	for len(dir) > 0 {
		if len(pat) == 0 {
			return false
		}
		if pat[0] == "**" {
			return true
		}
		if ok, _ := path.Match(pat[0], dir[0]); !ok {
			return false
		}
		pat, dir = pat[1:], dir[1:]
	}
	return len(pat) > 0
}
