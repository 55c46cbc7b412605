//go:build race

package main

// raceOverhead is the race detector's own memory (shadow of the Go heap) in the mount process.
const raceOverhead = 64 << 20
