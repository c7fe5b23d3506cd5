package callview

import (
	"html"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// htmlStart finds where an HTML document starts in an error's text.
var htmlStart = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?i)<!doctype html|<html[\s>]`) })

// titleRE finds an HTML page's title.
var titleRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?is)<title[^>]*>(.*?)</title>`) })

// ErrorText is an error's text for a line a person reads: an HTML page
// quoted in it (a proxy's error page, a wrong base URL's answer) is
// replaced by its title, which says what the markup does not.
func ErrorText(s string) string {
	loc := htmlStart().FindStringIndex(s)
	if loc == nil {
		return s
	}
	page := "an HTML page"
	if m := titleRE().FindStringSubmatch(s[loc[0]:]); m != nil {
		if t := strings.Join(strings.Fields(html.UnescapeString(m[1])), " "); t != "" {
			page += " titled “" + t + "”"
		}
	}
	return s[:loc[0]] + page + " (not the API's answer: is the base URL right?)"
}

// RetryLine is what a person is told of a retried request: the error the
// first time, and that it failed the same way when the error is the one
// of the attempt before (prev, the text of that error, "" for none), so
// that a page quoted in an error is not repeated on every attempt.
func RetryLine(delay string, attempt int, err, prev string) string {
	if prev != "" && err == prev {
		return "retrying in " + delay + " (attempt " + itoa(attempt) + " failed the same way)"
	}
	return "retrying in " + delay + " (attempt " + itoa(attempt) + " failed: " + ErrorText(err) + ")"
}

func itoa(n int) string { return strconv.Itoa(n) }
