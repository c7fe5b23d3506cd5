package tools

import (
	"cmp"
	"context"
	"io/fs"
	"os"
	"slices"
	"strings"
)

// ListPaths returns the files and directories under dir as slash paths
// relative to it (directories ending in "/"), shallowest first and sorted
// within a directory, the way grep sees the tree: entries ignored by
// .git/info/exclude or a .gitignore file are left out, and so is .git;
// symbolic links are listed but not followed. The walk stops after limit
// entries are visited (cut is then true) or when ctx is done. The chat
// completes "@" paths from it.
func ListPaths(ctx context.Context, dir string, limit int) (paths []string, cut bool, err error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, false, err
	}
	defer root.Close()
	type pending struct {
		rel string
		ign *ignoreRules
	}
	top := loadIgnoreFile(root, nil, ".git/info/exclude", ".")
	queue := []pending{{rel: ".", ign: top}}
	visited := 0
	for len(queue) > 0 {
		d := queue[0]
		queue = queue[1:]
		if err := ctx.Err(); err != nil {
			return paths, true, err
		}
		ign := d.ign
		gi := ".gitignore"
		if d.rel != "." {
			gi = d.rel + "/.gitignore"
		}
		ign = loadIgnoreFile(root, ign, gi, d.rel)
		var entries []fs.DirEntry
		if d.rel == "." {
			entries, err = fs.ReadDir(root.FS(), ".")
			if err != nil {
				return nil, false, err
			}
		} else if entries, err = fs.ReadDir(root.FS(), d.rel); err != nil {
			continue // an unreadable directory
		}
		for _, e := range entries {
			visited++
			if visited > limit {
				return paths, true, nil
			}
			name := e.Name()
			p := name
			if d.rel != "." {
				p = d.rel + "/" + name
			}
			isDir := e.IsDir()
			if name == ".git" && isDir || ign.ignored(p, isDir) {
				continue
			}
			if isDir {
				paths = append(paths, p+"/")
				queue = append(queue, pending{rel: p, ign: ign})
				continue
			}
			paths = append(paths, p)
		}
	}
	return paths, false, nil
}

// MatchPaths returns at most n of paths that match query, best first: a
// path whose last element starts with query, then one whose last element
// holds it, then one holding it anywhere; case-insensitively, shorter
// paths first within each rank.
func MatchPaths(paths []string, query string, n int) []string {
	q := strings.ToLower(query)
	var ranked [3][]string
	for _, p := range paths {
		lp := strings.ToLower(p)
		base := lp[strings.LastIndex(strings.TrimSuffix(lp, "/"), "/")+1:]
		switch {
		case strings.HasPrefix(base, q) || strings.HasPrefix(lp, q):
			ranked[0] = append(ranked[0], p)
		case strings.Contains(base, q):
			ranked[1] = append(ranked[1], p)
		case strings.Contains(lp, q):
			ranked[2] = append(ranked[2], p)
		}
	}
	var out []string
	for _, r := range ranked {
		// Shallow, short paths first (the list is shallowest first).
		sortStable(r)
		for _, p := range r {
			if len(out) == n {
				return out
			}
			out = append(out, p)
		}
	}
	return out
}

// sortStable orders paths by their number of elements, then length,
// keeping the order of equals.
func sortStable(ps []string) {
	key := func(p string) (int, int) { return strings.Count(strings.TrimSuffix(p, "/"), "/"), len(p) }
	slices.SortStableFunc(ps, func(a, b string) int {
		a1, a2 := key(a)
		b1, b2 := key(b)
		return cmp.Or(cmp.Compare(a1, b1), cmp.Compare(a2, b2))
	})
}
