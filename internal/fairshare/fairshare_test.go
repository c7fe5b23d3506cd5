package fairshare

import (
	"math"
	"testing"
)

// TestAllows: keys that each take all the rule lets them, one after
// another (each up to perKey, as the servers' per-key bounds), then in
// turns, never exceed the bound, and leave a key that holds none room to
// take one for as long as they are fewer than Reserve/Floor.
func TestAllows(t *testing.T) {
	for _, tc := range []struct{ bound, perKey int }{
		{1, 1}, {2, 2}, {16, 8}, {64, 64}, {1024, 1024}, {8192, 1024}, {16384, 1024}, {262144, 65536},
	} {
		keys := tc.bound/tc.perKey + Reserve(tc.bound)/Floor(tc.bound) + 2
		held, total := make([]int, keys), 0
		admitted := -1 // the keys in order until one with none was refused
		for round := range 2 {
			for more := true; more; {
				more = false
				for i := range held {
					if round == 0 && admitted < 0 && held[i] == 0 && !Allows(0, total, tc.bound) {
						admitted = i
					}
					for held[i] < tc.perKey && Allows(held[i], total, tc.bound) {
						held[i]++
						total++
						more = true
						if round == 1 {
							break
						}
					}
				}
			}
		}
		if total > tc.bound {
			t.Errorf("bound %d: %d taken", tc.bound, total)
		}
		if want := (tc.bound-Reserve(tc.bound)+tc.perKey-1)/tc.perKey + Reserve(tc.bound)/Floor(tc.bound); admitted >= 0 && admitted < want-1 {
			t.Errorf("bound %d, %d a key: the %dth key was refused with none, want at least %d keys admitted", tc.bound, tc.perKey, admitted+1, want-1)
		}
	}
	// No bound (a negative option: math.MaxInt): all are admitted.
	if !Allows(1<<40, 1<<50, math.MaxInt) {
		t.Error("refused with no bound")
	}
	for _, tc := range []struct{ bound, reserve, floor int }{
		{1, 0, 1}, {2, 0, 1}, {3, 0, 1}, {4, 1, 1}, {16, 4, 1}, {8192, 2048, 8}, {16384, 4096, 8},
	} {
		if r, f := Reserve(tc.bound), Floor(tc.bound); r != tc.reserve || f != tc.floor {
			t.Errorf("bound %d: reserve %d, floor %d, want %d, %d", tc.bound, r, f, tc.reserve, tc.floor)
		}
	}
}
