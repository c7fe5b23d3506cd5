package api

import (
	"strconv"
	"strings"
)

// HeaderEvents is the response header in which hrns serve gives the
// events a caller's input appended to the session's log (an hrns
// addition to the reference API): "FROM-TO", the indexes FROM to TO-1,
// none when FROM equals TO. It comes with POST .../tool_results. A client
// that had read the log up to FROM can go on from TO without reading its
// own input back; when FROM is not where it was, something else came in
// between and it reads on from where it was.
const HeaderEvents = "Hrns-Events"

// FormatEventRange writes a [HeaderEvents] value.
func FormatEventRange(from, to int64) string {
	return strconv.FormatInt(from, 10) + "-" + strconv.FormatInt(to, 10)
}

// ParseEventRange reads a [HeaderEvents] value; ok is false unless it is
// two decimal numbers without sign, the first not above the second.
func ParseEventRange(v string) (from, to int64, ok bool) {
	a, b, found := strings.Cut(v, "-")
	if !found || len(v) > 41 {
		return 0, 0, false
	}
	from, err1 := parseIndex(a)
	to, err2 := parseIndex(b)
	if err1 != nil || err2 != nil || from > to {
		return 0, 0, false
	}
	return from, to, true
}

func parseIndex(s string) (int64, error) {
	if s == "" || s[0] < '0' || s[0] > '9' {
		return 0, strconv.ErrSyntax
	}
	return strconv.ParseInt(s, 10, 64)
}
