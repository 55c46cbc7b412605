//go:build !race

package isolate

// raceBase is 0 without the race detector (race.go).
const raceBase = 0
