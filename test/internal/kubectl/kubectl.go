// Package kubectl runs the real kubectl (Debian's /usr/bin/kubectl, a dispatcher that picks its
// binary from the server's /version minor) against one opemu, for opemu's e2e and integration
// tests: each Kubectl has its own HOME, kubeconfig and cache directory, and runs in the
// repository's root, so manifests are named as the README names them (examples/...).
//
// Concurrency: a Kubectl may run commands from parallel goroutines of its test.
package kubectl

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/opemu/opemu/test/internal/tool"
)

// Path is where kubectl is.
const Path = "/usr/bin/kubectl"

// Kubectl runs kubectl with one kubeconfig.
type Kubectl struct {
	t *testing.T
	// Home is kubectl's HOME, holding the kubeconfig and the discovery cache.
	Home string
	// Kubeconfig is the kubeconfig's path ($KUBECONFIG).
	Kubeconfig string
	dir        string
}

// New writes kubeconfig into a new HOME for t and returns a Kubectl that uses it. Without
// kubectl the test fails in CI and is skipped elsewhere.
func New(t *testing.T, kubeconfig []byte) *Kubectl {
	t.Helper()
	tool.At(t, Path, "kubectl")
	home := t.TempDir()
	k := &Kubectl{t: t, Home: home, Kubeconfig: filepath.Join(home, "kubeconfig"), dir: tool.Repo(t)}
	k.SetKubeconfig(kubeconfig)
	return k
}

// SetKubeconfig replaces the kubeconfig later commands use.
func (k *Kubectl) SetKubeconfig(kubeconfig []byte) {
	k.t.Helper()
	require.NoError(k.t, os.WriteFile(k.Kubeconfig, kubeconfig, 0o600))
}

// Env is the environment kubectl runs with (HOME and KUBECONFIG set), for a script that calls
// it.
func (k *Kubectl) Env() []string {
	return append(os.Environ(), "HOME="+k.Home, "KUBECONFIG="+k.Kubeconfig)
}

// Cmd is kubectl with args, not started, bound to ctx; it runs in the repository's root.
func (k *Kubectl) Cmd(ctx context.Context, args ...string) *exec.Cmd {
	args = append([]string{"--cache-dir", filepath.Join(k.Home, "cache")}, args...)
	cmd := exec.CommandContext(ctx, Path, args...)
	cmd.Env = k.Env()
	cmd.Dir = k.dir
	return cmd
}

// Run runs kubectl and returns its combined output, failing the test on a non-zero exit or
// after a minute.
func (k *Kubectl) Run(args ...string) string {
	k.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := k.Cmd(ctx, args...).CombinedOutput()
	require.NoError(k.t, err, "kubectl %s:\n%s", strings.Join(args, " "), out)
	return string(out)
}

// Apply runs kubectl apply -f - with manifest on its standard input.
func (k *Kubectl) Apply(manifest string) {
	k.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := k.Cmd(ctx, "apply", "-f", "-")
	cmd.Stdin = strings.NewReader(manifest)
	out, err := cmd.CombinedOutput()
	require.NoError(k.t, err, "kubectl apply:\n%s", out)
}
