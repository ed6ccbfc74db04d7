package e2e

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// binary is the opemu binary the tests run: built by TestMain, or $OPEMU_TEST_BINARY (a
// given build, to compare builds with the benchmarks).
var binary string

// binDir is where TestMain builds the binaries; removed when the tests end.
var binDir string

// shippedBuild is the other build, made once, on first use (or at the start of a run of every
// test); it is used only when the tests run with -race (see shippedBinary).
var shippedBuild = &variant{file: "opemu-shipped"}

func TestMain(m *testing.M) { os.Exit(runTests(m)) }

func runTests(m *testing.M) int {
	flag.Parse()
	if flag.Lookup("test.list").Value.String() != "" {
		return m.Run() // listing runs no test: nothing to build
	}
	dir, err := os.MkdirTemp("", "opemu-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binDir = dir
	var prebuilt sync.WaitGroup
	defer prebuilt.Wait() // before the directory goes
	if flag.Lookup("test.run").Value.String() == "" && flag.Lookup("test.bench").Value.String() == "" {
		// Every test runs: the hostile-input tests will want their build, which is made
		// meanwhile rather than when the first of them asks.
		if raceEnabled && os.Getenv("OPEMU_TEST_BINARY") == "" {
			prebuilt.Go(func() { _, _ = shippedBuild.get() })
		}
	}
	binary = os.Getenv("OPEMU_TEST_BINARY")
	if binary == "" {
		binary = filepath.Join(dir, "opemu")
		if err := build(binary, raceEnabled); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return m.Run()
}

// build builds opemu (the repository's main package, as `go build -o out .` there) into out,
// with the race detector when race is set. A race build leaves out
// the DWARF tables (-ldflags=-w), which only debuggers read (race reports and panics are
// symbolized without them), and which take half its link time.
func build(out string, race bool) error {
	args := []string{"build", "-o", out}
	if race {
		args = append(args, "-race", "-ldflags=-w")
	}
	args = append(args, "github.com/opemu/opemu")
	if b, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	return nil
}

// variant is a build of opemu other than binary, made once.
type variant struct {
	file string // its name in binDir
	race bool   // built with -race

	once sync.Once
	path string
	err  error
}

// get returns the build's path, building it on the first call; concurrent calls wait for it.
func (v *variant) get() (string, error) {
	v.once.Do(func() {
		v.path = filepath.Join(binDir, v.file)
		v.err = build(v.path, v.race)
	})
	return v.path, v.err
}

// shippedBinary returns opemu built as it ships, without the race detector even when these
// tests run under it: for the tests that hold the binary to SPEC's bounds of time and memory
// under hostile input, which the detector's instrumentation (several times the CPU and the
// memory) would turn into measurements of the detector. It is binary itself when the tests run
// without -race or $OPEMU_TEST_BINARY names a build.
func shippedBinary(t testing.TB) string {
	t.Helper()
	if !raceEnabled || os.Getenv("OPEMU_TEST_BINARY") != "" {
		return binary
	}
	path, err := shippedBuild.get()
	require.NoError(t, err)
	return path
}
