package main

import (
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// Package initialisation is what every hrns command pays at start,
// whether or not it uses the package (docs/performance.md, target 4).
// These bounds are counts, not times: the runtime's inittrace reports
// what each package's initialisation allocated. hrns run --help allocated
// 556,432 bytes in 3,099 allocations in all (Go 1.26.8, December 2026),
// its own packages at most 5,800 bytes and 40 allocations each; the
// bounds leave about a tenth for dependency upgrades. A new package-level
// regular expression, table or map in hrns's own code should be built on
// first use (sync.OnceValue), not here.
const (
	initBytesBound       = 620_000
	initAllocsBound      = 3_400
	ownInitBytesBound    = 8 << 10
	ownInitAllocsBound   = 64
	ownPackagePathPrefix = "github.com/hrns-dev/hrns/"
)

var initLine = regexp.MustCompile(`^init (\S+) @[0-9.]+ ms, [0-9.]+ ms clock, ([0-9]+) bytes, ([0-9]+) allocs$`)

// TestStartupInitWork bounds what package initialisation allocates in
// `hrns run --help`, the bench's start-up, in all and for each of hrns's
// own packages.
func TestStartupInitWork(t *testing.T) {
	cmd := exec.CommandContext(t.Context(), hrnsBin, "run", "--help")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "GODEBUG=inittrace=1"}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("hrns run --help: %v\n%s", err, stderr.String())
	}
	var bytesAll, allocsAll, packages int
	for _, line := range strings.Split(stderr.String(), "\n") {
		m := initLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		packages++
		b, _ := strconv.Atoi(m[2])
		a, _ := strconv.Atoi(m[3])
		bytesAll += b
		allocsAll += a
		if strings.HasPrefix(m[1], ownPackagePathPrefix) && (b > ownInitBytesBound || a > ownInitAllocsBound) {
			t.Errorf("%s: initialisation allocates %d bytes in %d allocations; at most %d and %d (build it on first use)",
				m[1], b, a, ownInitBytesBound, ownInitAllocsBound)
		}
	}
	if packages < 100 {
		t.Fatalf("inittrace listed %d packages; is GODEBUG=inittrace=1 still the runtime's?\n%.2000s", packages, stderr.String())
	}
	t.Logf("%d packages initialised: %d bytes, %d allocations", packages, bytesAll, allocsAll)
	if bytesAll > initBytesBound || allocsAll > initAllocsBound {
		t.Errorf("package initialisation allocates %d bytes in %d allocations; at most %d and %d (docs/performance.md, target 4)",
			bytesAll, allocsAll, initBytesBound, initAllocsBound)
	}
}
