// Package fairshare is the rule by which keys (the API keys of a
// server, the owners of a manager's reads) share a bound that all of
// them count against: the requests waiting in a process, which many
// keys together must not exceed, and no few of them fill.
//
// The last quarter of the bound ([Reserve]) is kept for the keys that
// hold little: past three quarters taken, a key may take one more only
// while it holds fewer than [Floor] (8 with the servers' defaults), and
// never past the bound. So keys that take all they may fill the first
// three quarters, whatever their number, and then each takes at most
// Floor of the rest: a key that holds fewer than Floor is refused only
// when the bound is full, which takes at least Reserve/Floor keys at
// once (512 for the 16,384 long-polls of hrns serve, 256 for its 8,192
// reads waiting). Each admission is O(1): it needs the key's count and
// the total, nothing of the other keys.
package fairshare

// Allows reports whether a key that holds held of bound, of which all
// keys together hold total, may take one more. A caller that tells the
// bound's being full apart (total >= bound: the server is full,
// whichever key asks) checks that first; a refusal with total below the
// bound is the key's: it holds its share.
func Allows(held, total, bound int) bool {
	if total < bound-Reserve(bound) {
		return true
	}
	return held < Floor(bound) && total < bound
}

// Reserve is the part of bound kept for the keys that hold fewer than
// Floor: a quarter, rounded down (none of a bound below 4).
func Reserve(bound int) int {
	return bound / 4
}

// Floor is what a key may hold and still take from the Reserve: 8, or
// fewer for a small bound (Reserve/64, at least 1), so that it takes
// many keys to take the whole Reserve.
func Floor(bound int) int {
	return min(8, max(1, Reserve(bound)/64))
}
