package tools

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
)

// The bounds of the ignore files grep reads.
const (
	maxIgnoreFileBytes = 256 << 10 // bytes read of one ignore file
	maxIgnorePatterns  = 50_000    // patterns in force at one directory
)

// ignoreRules are the gitignore patterns in force in a directory, in
// increasing priority: .git/info/exclude, then the .gitignore files from
// the root down. The patterns of a directory's .gitignore carry it as
// their domain, so they apply only below it. Matching is go-git's
// (plumbing/format/gitignore), which follows git's rules: the last
// pattern that matches decides, ! re-includes, a trailing / matches
// directories only, a / elsewhere anchors the pattern to its directory,
// and ** spans directories. A nil *ignoreRules ignores nothing.
type ignoreRules struct {
	patterns []gitignore.Pattern
}

// ignored reports whether the slash path p, relative to the root, is
// ignored.
func (r *ignoreRules) ignored(p string, isDir bool) bool {
	if r == nil || len(r.patterns) == 0 {
		return false
	}
	parts := strings.Split(p, "/")
	for i := len(r.patterns) - 1; i >= 0; i-- {
		switch r.patterns[i].Match(parts, isDir) {
		case gitignore.Exclude:
			return true
		case gitignore.Include:
			return false
		}
	}
	return false
}

// loadIgnoreFile returns parent's rules followed by those of the ignore
// file at rel (a slash path relative to root), whose patterns apply
// below dir. A missing or unreadable file, or one that is not a regular
// file, adds nothing; only its first maxIgnoreFileBytes are read, and the
// rules in force stop growing at maxIgnorePatterns.
func loadIgnoreFile(root *os.Root, parent *ignoreRules, rel, dir string) *ignoreRules {
	f, err := root.OpenFile(rel, os.O_RDONLY|openNonblock, 0)
	if err != nil {
		return parent
	}
	defer f.Close()
	if info, err := f.Stat(); err != nil || !info.Mode().IsRegular() {
		return parent
	}
	data, err := io.ReadAll(io.LimitReader(f, maxIgnoreFileBytes))
	if err != nil {
		return parent
	}
	var domain []string
	if dir != "." {
		domain = strings.Split(dir, "/")
	}
	var rules *ignoreRules
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, maxIgnoreFileBytes)
	for sc.Scan() {
		line := strings.TrimSuffix(sc.Text(), "\r")
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if rules == nil {
			rules = &ignoreRules{}
			if parent != nil {
				rules.patterns = append(rules.patterns, parent.patterns...)
			}
		}
		if len(rules.patterns) >= maxIgnorePatterns {
			break
		}
		rules.patterns = append(rules.patterns, gitignore.ParsePattern(line, domain))
	}
	if rules == nil {
		return parent
	}
	return rules
}
