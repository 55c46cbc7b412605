//go:build race

package main

// raceOverhead is the race detector's own memory (shadow of the Go heap) in the mount process.
const raceOverhead = 64 << 20

// raceTierOverhead is what the race detector adds with the disk tier on: under -race sync.Pool
// drops what it holds, so zstd's pooled buffers are allocated afresh for each sample, and the Go
// heap they churn through is shadowed too (measured 315-330 MiB peak against 107 MiB without).
// make test runs the memory test again without the race detector, where this is 0.
const raceTierOverhead = 224 << 20
