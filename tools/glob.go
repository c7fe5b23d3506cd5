package tools

import (
	"fmt"
	"path"
	"strings"
)

// The bounds of a list_files pattern.
const (
	maxGlobBytes    = 1024
	maxGlobSegments = 64
)

// glob is a compiled list_files pattern: slash-separated segments, each a
// path.Match pattern or "**", which matches any number of segments (none
// included).
//
// It is matched one path segment at a time, as the walk goes down, by
// keeping the set of pattern positions the path so far can have reached
// (a state), so that each entry costs at most one path.Match per pattern
// segment, whatever the pattern: no backtracking, however many ** it
// holds. work counts the path.Match calls, for the tests.
type glob struct {
	segs []string
	work int
}

func compileGlob(pattern string) (*glob, error) {
	if strings.HasPrefix(pattern, "/") {
		return nil, fmt.Errorf("pattern %q must be relative to path", pattern)
	}
	if len(pattern) > maxGlobBytes {
		return nil, fmt.Errorf("the pattern is %d bytes long; list_files takes patterns of at most %d", len(pattern), maxGlobBytes)
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
	if len(segs) > maxGlobSegments {
		return nil, fmt.Errorf("the pattern has %d segments; list_files takes patterns of at most %d", len(segs), maxGlobSegments)
	}
	return &glob{segs: segs}, nil
}

// A globState is the set of pattern positions a path can have reached:
// position i means segs[:i] matched it. Position len(segs) is a match.
type globState []bool

// start returns the state of the empty path.
func (g *glob) start() globState {
	s := make(globState, len(g.segs)+1)
	s[0] = true
	g.close(s)
	return s
}

// close adds to s the positions reachable without a segment: past a **,
// which may match none.
func (g *glob) close(s globState) {
	for i, seg := range g.segs {
		if s[i] && seg == "**" {
			s[i+1] = true
		}
	}
}

// step returns the state after the path of state s is extended by the
// segment name.
func (g *glob) step(s globState, name string) globState {
	next := make(globState, len(s))
	for i, seg := range g.segs {
		if !s[i] {
			continue
		}
		if seg == "**" {
			next[i] = true // ** takes this segment too, and may take more
			continue
		}
		g.work++
		if ok, _ := path.Match(seg, name); ok {
			next[i+1] = true
		}
	}
	g.close(next)
	return next
}

// matched reports whether the path of state s matches the pattern.
func (g *glob) matched(s globState) bool { return s[len(g.segs)] }

// more reports whether a path that extends the one of state s by at least
// one segment could match: whether walking into a directory is useful.
func (g *glob) more(s globState) bool {
	for i := range g.segs {
		if s[i] {
			return true
		}
	}
	return false
}

// match reports whether the path made of name segments matches the pattern.
func (g *glob) match(name []string) bool {
	s := g.start()
	for _, n := range name {
		s = g.step(s, n)
	}
	return g.matched(s)
}
