// Package tool finds the programs opemu's e2e and integration tests drive besides opemu
// (kubectl, Chromium, curl, python3, node), and the repository's root they run in: a program
// that is missing fails the test when CI is set (.ci/run installs them from Debian) and skips
// it elsewhere, so a developer without them can still run the rest.
//
// Concurrency: the functions are safe for parallel tests.
package tool

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Missing fails t when CI is set, and skips it otherwise, saying what is missing.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("required in CI: "+format, args...)
	}
	t.Skipf("not available: "+format, args...)
}

// Path returns the path of the program name found on PATH (Missing when there is none).
func Path(t testing.TB, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		Missing(t, "%s is not installed: %v", name, err)
	}
	return path
}

// At returns path when a program is there (Missing, naming the Debian package that installs
// it, when not).
func At(t testing.TB, path, debianPackage string) string {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		Missing(t, "%s (.ci/run installs the Debian package %s): %v", path, debianPackage, err)
	}
	return path
}

// Repo returns the repository's root directory (the one holding go.mod), found from the test's
// working directory: the commands of the README and the manifests of examples/ are named from
// there.
func Repo(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's working directory")
		}
		dir = parent
	}
}
