package readme

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/opemu/opemu/test/internal/tool"
)

// TestREADMETestenvFromAnotherModule does what the README's testenv section tells an operator
// author, in a module of its own outside the repository: its go.mod gets the README's
// require and replace (the clone beside it, as ../opemu), `go mod tidy` fills in the rest,
// and the README's suite, pasted verbatim as suite_test.go with a CRD in config/crd/bases,
// passes. Offline: no module proxy (GOPROXY=off) and no checksum database (GOSUMDB=off), the
// module cache has everything, since the suite needs nothing opemu does not.
func TestREADMETestenvFromAnotherModule(t *testing.T) {
	t.Parallel()
	repo := tool.Repo(t)
	raw, err := os.ReadFile(filepath.Join(repo, "README.md"))
	require.NoError(t, err)
	readme := string(raw)
	setup := regexp.MustCompile("(?s)```sh\n(go mod edit -require=github.com/opemu/opemu[^`]*)```").FindStringSubmatch(readme)
	require.NotNil(t, setup, "the README's go mod edit for testenv")
	suite := regexp.MustCompile("(?s)```go\n(package [a-z_]+\n[^`]*\"github.com/opemu/opemu/testenv\"[^`]*)```").FindStringSubmatch(readme)
	require.NotNil(t, suite, "the README's testenv suite")
	assert.Contains(t, suite[1], `filepath.Join("config", "crd", "bases")`)

	dir := t.TempDir()
	require.NoError(t, os.Symlink(repo, filepath.Join(dir, "opemu")))
	mod := filepath.Join(dir, "suite")
	crds := filepath.Join(mod, "config", "crd", "bases")
	require.NoError(t, os.MkdirAll(crds, 0o755))
	crd, err := os.ReadFile(filepath.Join(repo, "examples", "widget-crd.yaml"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(crds, "widgets.yaml"), crd, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(mod, "suite_test.go"), []byte(suite[1]), 0o644))

	env := []string{"GOFLAGS=-mod=mod", "GOPROXY=off", "GOSUMDB=off", "GOTOOLCHAIN=local"}
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "GOFLAGS" && k != "GOPROXY" && k != "GOSUMDB" && k != "GOTOOLCHAIN" {
			env = append(env, kv)
		}
	}
	sh := func(timeout time.Duration, script string) string {
		t.Helper()
		cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
		cmd.Dir, cmd.Env = mod, env
		// Bounded: a hang is killed (and fails below) rather than waited for.
		timer := time.AfterFunc(timeout, func() { _ = cmd.Process.Kill() })
		defer timer.Stop()
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s:\n%s", script, out)
		return string(out)
	}
	sh(time.Minute, "go mod init example.com/suite")
	sh(2*time.Minute, setup[1])
	goMod, err := os.ReadFile(filepath.Join(mod, "go.mod"))
	require.NoError(t, err)
	assert.Contains(t, string(goMod), "replace github.com/opemu/opemu => ../opemu")
	out := sh(8*time.Minute, "go test -count=1 -v ./...")
	assert.Contains(t, out, "--- PASS: TestOwnCluster")
	assert.Contains(t, out, "ok  \texample.com/suite")
}
