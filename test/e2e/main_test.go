package e2e

import (
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

func TestMain(m *testing.M) { os.Exit(runTests(m)) }

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "opemu-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binDir = dir
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

// build builds opemu (the repository's main package, as `go build -o out .` there) into out
// with the build tags given, with the race detector when race is set.
func build(out string, race bool, tags ...string) error {
	args := []string{"build", "-o", out}
	if race {
		args = append(args, "-race")
	}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	args = append(args, "github.com/opemu/opemu")
	if b, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	return nil
}

var (
	etcdBinOnce, shippedOnce sync.Once
	etcdBin, shipped         string
	etcdBinErr, shippedErr   error
)

// etcdBinary returns opemu built with etcd support (go build -tags etcd), built once on first
// use (or $OPEMU_TEST_ETCD_BINARY).
func etcdBinary(t testing.TB) string {
	t.Helper()
	etcdBinOnce.Do(func() {
		if etcdBin = os.Getenv("OPEMU_TEST_ETCD_BINARY"); etcdBin != "" {
			return
		}
		etcdBin = filepath.Join(binDir, "opemu-etcd")
		etcdBinErr = build(etcdBin, raceEnabled, "etcd")
	})
	require.NoError(t, etcdBinErr)
	return etcdBin
}

// shippedBinary returns opemu built as it ships, without the race detector even when these
// tests run under it: for the tests that hold the binary to SPEC's bounds of time and memory
// under hostile input, which the detector's instrumentation (several times the CPU and the
// memory) would turn into measurements of the detector. It is binary itself when the tests run
// without -race or $OPEMU_TEST_BINARY names a build; otherwise it is built once, on first use.
func shippedBinary(t testing.TB) string {
	t.Helper()
	if !raceEnabled || os.Getenv("OPEMU_TEST_BINARY") != "" {
		return binary
	}
	shippedOnce.Do(func() {
		shipped = filepath.Join(binDir, "opemu-shipped")
		shippedErr = build(shipped, false)
	})
	require.NoError(t, shippedErr)
	return shipped
}
