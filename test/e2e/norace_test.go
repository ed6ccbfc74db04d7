//go:build !race

package e2e

// raceEnabled: these tests run without the race detector, and so do the binaries they build
// (the benchmarks measure the binary as it ships).
const raceEnabled = false
