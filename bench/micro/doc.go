// Package micro holds the benchmarks of hrns's hot paths, each set against
// the raw baseline of package [github.com/hrns-dev/hrns/bench/internal/raw]
// in the same benchmark function, so that one run gives their ratio:
//
//	go test -run '^$' -bench . -benchmem ./micro
//
// BenchmarkStream reads a whole streamed answer from memory, through the
// same in-memory [http.RoundTripper] for both clients: SSE framing alone
// (a body of comment lines), chunk decoding (a final answer of 100 content
// chunks) and tool-call accumulation (one call whose arguments arrive in 100
// deltas). BenchmarkToolArgs measures argument validation, and
// BenchmarkChunkJSON the encoding of run events as hrns run --json writes
// them. Each reports ns per chunk or per call besides ns/op.
//
// The package has no code of its own: it is here for its tests.
package micro
