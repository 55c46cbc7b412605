//go:build race

package isolate

// raceBase is what a helper built with the race detector needs beside dataBase: its runtime
// keeps about 400 MiB more (VmData).
const raceBase = 1 << 30
