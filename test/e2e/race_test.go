//go:build race

package e2e

// raceEnabled: these tests run under the race detector, and so do the binaries they build.
const raceEnabled = true
