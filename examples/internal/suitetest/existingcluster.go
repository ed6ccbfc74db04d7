// Package suitetest holds what the examples' kubebuilder-style suites share: running a suite
// again on the opemu binary, as envtest's existing-cluster mode runs one on a cluster
// (USE_EXISTING_CLUSTER=true), and waiting for a suite's webhook server.
package suitetest

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// RunOnExistingCluster runs the calling test binary's other tests again, unchanged, as an envtest suite runs
// on an existing cluster: it builds the opemu binary, starts it, writes its kubeconfig with
// `opemu kubeconfig`, and runs the test binary with USE_EXISTING_CLUSTER=true and KUBECONFIG
// pointing at it. Every other test must pass there too (opemu calls the webhook server of the
// child process). t is the test that calls it, which the child skips.
func RunOnExistingCluster(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "opemu")
	out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/opemu/opemu").CombinedOutput()
	require.NoError(t, err, "building opemu:\n%s", out)

	opemu := startOpemu(t, bin)
	kubeconfig := filepath.Join(dir, "kubeconfig")
	out, err = exec.CommandContext(ctx, bin, "kubeconfig", "--server", "http://"+opemu.addr).Output()
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(kubeconfig, out, 0o600))

	// The tests to expect, from the test binary itself.
	out, err = exec.CommandContext(ctx, os.Args[0], "-test.list", "^Test").Output()
	require.NoError(t, err)
	var tests []string
	for _, name := range strings.Fields(string(out)) {
		if name != t.Name() {
			tests = append(tests, name)
		}
	}
	require.NotEmpty(t, tests)

	child := exec.CommandContext(ctx, os.Args[0], "-test.v", "-test.count=1", "-test.run", "^("+strings.Join(tests, "|")+")$")
	child.Env = append(os.Environ(), "USE_EXISTING_CLUSTER=true", "KUBECONFIG="+kubeconfig)
	out, err = child.CombinedOutput()
	require.NoError(t, err, "the suite on an existing cluster failed:\n%s\nopemu's log:\n%s", out, opemu.logs())
	for _, name := range tests {
		assert.Contains(t, string(out), "--- PASS: "+name+" ", "%s did not pass on the existing cluster", name)
	}
}

// process is a running opemu binary.
type process struct {
	addr string
	mu   sync.Mutex // guards log
	log  bytes.Buffer
}

func (p *process) logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

var listeningRE = regexp.MustCompile(`listening addr=(\S+)`)

// startOpemu runs bin on a free loopback port (its default settings otherwise: the built-in
// controllers and the garbage collector run) until t ends, when it gets SIGTERM.
func startOpemu(t *testing.T, bin string) *process {
	t.Helper()
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "ADDR=127.0.0.1:0", "LOG_LEVEL=info")
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	p := &process{}
	first := make(chan string, 1)
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			select {
			case first <- sc.Text():
			default:
			}
			p.mu.Lock()
			p.log.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
		}
		_ = cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			t.Errorf("opemu did not stop within 10s of SIGTERM")
		}
	})
	select {
	case line := <-first:
		m := listeningRE.FindStringSubmatch(line)
		require.NotNil(t, m, "the first log line must be `listening addr=...`, got %q", line)
		p.addr = m[1]
	case <-time.After(10 * time.Second):
		t.Fatal("opemu printed nothing within 10s")
	}
	return p
}
