//go:build !race

package tools

// raceEnabled: these tests run without the race detector, and so do the binaries they build.
const raceEnabled = false
