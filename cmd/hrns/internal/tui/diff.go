package tui

import (
	"strings"
)

// A diffLine is one line of a diff: Op is ' ' (context), '-' (only in
// the old text), '+' (only in the new one) or '~' (a gap between hunks).
// Old and New are 1-based line numbers, 0 where the line has none.
type diffLine struct {
	Op       byte
	Old, New int
	Text     string
}

// maxDiffCells bounds the work of the line diff: past it (in lines of the
// old text times lines of the new, after the common head and tail are set
// aside) the changed middle is shown as removed then added.
const maxDiffCells = 4 << 20

// splitLines cuts s into lines; a final newline does not start a line.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// diffText returns the lines of a diff of old to new with context lines of
// context around each change; hunks further apart are separated by a gap.
// Equal texts give no lines.
func diffText(old, new string, context int) []diffLine {
	a, b := splitLines(old), splitLines(new)
	all := diffAll(a, b)
	changed := make([]bool, len(all))
	any := false
	for i, l := range all {
		if l.Op != ' ' {
			for j := max(0, i-context); j <= min(len(all)-1, i+context); j++ {
				changed[j] = true
			}
			any = true
		}
	}
	if !any {
		return nil
	}
	var out []diffLine
	gap := false
	for i, l := range all {
		if !changed[i] {
			gap = true
			continue
		}
		if gap && len(out) > 0 {
			out = append(out, diffLine{Op: '~'})
		}
		gap = false
		out = append(out, l)
	}
	return out
}

// diffAll returns every line of a and b as context, removal or addition,
// by a longest common subsequence of lines.
func diffAll(a, b []string) []diffLine {
	var out []diffLine
	p := 0
	for p < len(a) && p < len(b) && a[p] == b[p] {
		out = append(out, diffLine{Op: ' ', Old: p + 1, New: p + 1, Text: a[p]})
		p++
	}
	s := 0
	for s < len(a)-p && s < len(b)-p && a[len(a)-1-s] == b[len(b)-1-s] {
		s++
	}
	am, bm := a[p:len(a)-s], b[p:len(b)-s]
	oi, ni := p+1, p+1
	emit := func(op byte, text string) {
		l := diffLine{Op: op, Text: text}
		switch op {
		case ' ':
			l.Old, l.New = oi, ni
			oi++
			ni++
		case '-':
			l.Old = oi
			oi++
		case '+':
			l.New = ni
			ni++
		}
		out = append(out, l)
	}
	if len(am)*len(bm) > maxDiffCells {
		for _, t := range am {
			emit('-', t)
		}
		for _, t := range bm {
			emit('+', t)
		}
	} else {
		// lcs[i][j] is the LCS length of am[i:] and bm[j:].
		w := len(bm) + 1
		lcs := make([]int32, (len(am)+1)*w)
		for i := len(am) - 1; i >= 0; i-- {
			for j := len(bm) - 1; j >= 0; j-- {
				if am[i] == bm[j] {
					lcs[i*w+j] = lcs[(i+1)*w+j+1] + 1
				} else {
					lcs[i*w+j] = max(lcs[(i+1)*w+j], lcs[i*w+j+1])
				}
			}
		}
		i, j := 0, 0
		for i < len(am) || j < len(bm) {
			switch {
			case i < len(am) && j < len(bm) && am[i] == bm[j]:
				emit(' ', am[i])
				i++
				j++
			case i < len(am) && (j == len(bm) || lcs[(i+1)*w+j] >= lcs[i*w+j+1]):
				emit('-', am[i])
				i++
			default:
				emit('+', bm[j])
				j++
			}
		}
	}
	for k := len(a) - s; k < len(a); k++ {
		emit(' ', a[k])
	}
	return out
}
