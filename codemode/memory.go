package codemode

import (
	"errors"
	"math"
	"runtime"
	"sync"

	"go.starlark.net/starlark"
)

// A meter bounds the memory one program makes the heap grow by. Every
// operation that can build a large value (see guard.go) is charged its
// size, estimated from its operands, before it runs; an operation that
// would take the charges past the limit first has the heap measured
// exactly (after a garbage collection, so that values the program dropped
// do not count), and is refused if it still does not fit. The small
// allocations of ordinary steps (a number, an element appended by a
// comprehension) are not charged one by one: the heap is sampled every
// few thousand steps and on a timer, and confirmed by a collection when
// it is over.
type meter struct {
	limit int64 // bytes; 0: no limit

	mu       sync.Mutex
	base     int64 // live heap when the program started
	measured int64 // heap growth at the last measure
	charged  int64 // bytes charged since then
}

// errMemory is the error of an operation refused by the meter.
var errMemory = errors.New("memory limit")

func newMeter(limit int64) *meter {
	m := &meter{limit: max(limit, 0)}
	if m.limit > 0 {
		runtime.GC()
		m.base = heapBytes()
	}
	return m
}

// charge accounts for n bytes about to be allocated, or returns errMemory
// if they do not fit.
func (m *meter) charge(n int64) error {
	if m.limit == 0 || n <= 0 {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if n > m.limit {
		return errMemory // no collection can make room
	}
	if m.measured+m.charged+n <= m.limit {
		m.charged += n
		return nil
	}
	m.measureLocked()
	if m.measured+n > m.limit {
		return errMemory
	}
	m.charged += n
	return nil
}

// over reports whether the heap grew past the limit: a sample, confirmed
// by a collection.
func (m *meter) over() bool {
	if m.limit == 0 {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if heapBytes()-m.base <= m.limit {
		return false
	}
	m.measureLocked()
	return m.measured > m.limit
}

func (m *meter) measureLocked() {
	runtime.GC()
	m.measured = max(heapBytes()-m.base, 0)
	m.charged = 0
}

// Sizes of Starlark values in memory, approximately, on 64-bit platforms.
const (
	wordSize  = 8
	valueSize = 2 * wordSize // an interface: a slot of a list or tuple
	entrySize = 96           // a slot of a dict or set table, with its share of buckets
	boxSize   = 32           // a small value boxed into an interface, or a header
)

// maxIntBits bounds the integers a program computes: multiplying two
// integers of millions of bits is one step that can take minutes, which
// no limit could interrupt.
const maxIntBits = 1 << 20

// elemSize estimates the memory of one element taken from v into a new
// list or table slot of size slot: the elements of a list, tuple, dict or
// set exist already, those of a range or a string's elems() are made.
func elemSize(v starlark.Value, slot int64) int64 {
	switch v.(type) {
	case *starlark.List, starlark.Tuple, *starlark.Dict, *starlark.Set:
		return slot
	}
	return slot + boxSize
}

// mul returns a*b, saturating instead of overflowing.
func mul(a, b int64) int64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	if a > math.MaxInt64/b {
		return math.MaxInt64
	}
	return a * b
}

// add returns the sum of ns, saturating instead of overflowing.
func add(ns ...int64) int64 {
	var s int64
	for _, n := range ns {
		if n > 0 {
			if s > math.MaxInt64-n {
				return math.MaxInt64
			}
			s += n
		}
	}
	return s
}

// footprint estimates the memory of a new value holding the elements of v
// (a copy of its top level: elements themselves are shared).
func footprint(v starlark.Value) int64 {
	switch v := v.(type) {
	case starlark.String:
		return int64(len(v))
	case starlark.Bytes:
		return int64(len(v))
	case starlark.Int:
		return int64(intBits(v)/8 + boxSize)
	case *starlark.Dict:
		return mul(int64(v.Len()), entrySize)
	case *starlark.Set:
		return mul(int64(v.Len()), entrySize)
	}
	if n := starlark.Len(v); n > 0 {
		return mul(int64(n), valueSize)
	}
	return 0
}

func intBits(i starlark.Int) int {
	if _, ok := i.Int64(); ok {
		return 64
	}
	return i.BigInt().BitLen()
}

// A sizer estimates, from above, the length of the text of values (their
// str or repr), without building it. It stops counting past limit, so
// that its work is bounded too, and counts a container shared by several
// others once, since its text is the same each time.
type sizer struct {
	limit int64
	seen  map[any]int64 // containers measured, and -1 for those in progress
	json  bool          // the text is JSON, whose escapes are longer
}

func newSizer(limit int64) *sizer {
	if limit <= 0 {
		limit = math.MaxInt64
	}
	return &sizer{limit: limit, seen: map[any]int64{}}
}

// str estimates len(str(v)): the text of a string is itself.
func (s *sizer) str(v starlark.Value) int64 {
	if v, ok := v.(starlark.String); ok {
		return int64(len(v))
	}
	return s.repr(v, 0)
}

// repr estimates len(repr(v)). so is what was counted before v, to stop
// early.
func (s *sizer) repr(v starlark.Value, so int64) int64 {
	if so > s.limit {
		return so
	}
	switch v := v.(type) {
	case starlark.String:
		if s.json {
			return 6*int64(len(v)) + 2 // every byte could be escaped as \u00XX
		}
		return 4*int64(len(v)) + 2 // every byte could be escaped as \xNN
	case starlark.Bytes:
		return 4*int64(len(v)) + 3
	case starlark.Int:
		return int64(intBits(v))*3/10 + 2
	case starlark.Float, starlark.Bool, starlark.NoneType:
		return 32
	case *starlark.List:
		return s.container(v, v.Len(), func(i int) []starlark.Value { return []starlark.Value{v.Index(i)} }, so)
	case starlark.Tuple:
		if len(v) == 0 {
			return 2
		}
		return s.container(tupleKey{&v[0], len(v)}, len(v), func(i int) []starlark.Value { return []starlark.Value{v[i]} }, so)
	case *starlark.Dict:
		items := v.Items()
		return s.container(v, len(items), func(i int) []starlark.Value { return []starlark.Value(items[i]) }, so)
	case *starlark.Set:
		var elems []starlark.Value
		iter := v.Iterate()
		var x starlark.Value
		for iter.Next(&x) {
			elems = append(elems, x)
		}
		iter.Done()
		return 7 + s.container(v, len(elems), func(i int) []starlark.Value { return elems[i : i+1] }, so)
	}
	return int64(len(v.String()))
}

// tupleKey identifies a tuple: its elements and length.
type tupleKey struct {
	first *starlark.Value
	n     int
}

// container estimates the text of a container of n entries, each of the
// values at(i).
func (s *sizer) container(key any, n int, at func(int) []starlark.Value, so int64) int64 {
	if size, ok := s.seen[key]; ok {
		if size < 0 {
			return 5 // a cycle is printed as [...]
		}
		return size
	}
	s.seen[key] = -1
	size := int64(2)
	for i := 0; i < n && so+size <= s.limit; i++ {
		for _, x := range at(i) {
			size = add(size, s.repr(x, so+size), 2)
		}
	}
	s.seen[key] = size
	return size
}

// jsonSize estimates the length of the JSON of v.
func jsonSize(v starlark.Value, limit int64) int64 {
	s := newSizer(limit)
	s.json = true
	return s.repr(v, 0)
}
