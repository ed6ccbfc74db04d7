package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/opemu/opemu/test/internal/tool"
)

// clientNodeVersion is the JavaScript client the test installs: the newest release that runs on
// Node 20 (the Debian machines' Node); 2.x needs Node >= 22.19.
const clientNodeVersion = "1.4.0"

// requireClientNode returns the path of @kubernetes/client-node's entry module, installing it
// with npm when it is not there yet. It lives in the temporary directory, outside the
// repository, and is reused by later runs (installed into a fresh directory, then renamed into
// place, so a half-finished install is never used). Node or npm missing, or npm failing: the
// test fails when CI is set and is skipped elsewhere.
func requireClientNode(t *testing.T) (node, entry string) {
	t.Helper()
	missing := func(format string, args ...any) {
		t.Helper()
		tool.Missing(t, "the JavaScript client: "+format, args...)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing("node is not installed: %v", err)
	}
	dir := filepath.Join(os.TempDir(), "opemu-test-client-node-"+clientNodeVersion)
	entry = filepath.Join(dir, "node_modules", "@kubernetes", "client-node", "dist", "index.js")
	if _, err := os.Stat(entry); err == nil {
		return node, entry
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		missing("npm is not installed: %v", err)
	}
	tmp, err := os.MkdirTemp(os.TempDir(), "opemu-test-client-node-*")
	require.NoError(t, err)
	defer os.RemoveAll(tmp)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, npm, "install", "--prefix", tmp, "--no-audit", "--no-fund", "--loglevel=error",
		"@kubernetes/client-node@"+clientNodeVersion).CombinedOutput()
	if err != nil {
		missing("npm install @kubernetes/client-node@%s: %v\n%s", clientNodeVersion, err, out)
	}
	if err := os.Rename(tmp, dir); err != nil {
		// Another run may have installed it meanwhile (a rename onto a non-empty directory
		// fails): use theirs.
		if _, statErr := os.Stat(entry); statErr != nil {
			t.Fatalf("installing the JavaScript client into %s: %v", dir, err)
		}
	}
	return node, entry
}

// TestClientNode: the JavaScript client lists and watches with the kubeconfig `opemu
// kubeconfig` wrote, unedited (it refuses a plain-HTTP server unless the cluster entry says
// insecure-skip-tls-verify), and creates a Namespace from a body without apiVersion and kind,
// named by generateName.
func TestClientNode(t *testing.T) {
	t.Parallel()
	node, entry := requireClientNode(t)
	p := start(t, "ENABLE_CONTROLLER=false", "ENABLE_LEADER_ELECTION=false")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "testdata/client_node.mjs", kubeconfigFile(t, p))
	cmd.Env = append(os.Environ(), "CLIENT_NODE="+entry)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "client_node.mjs:\nstdout:\n%s\nstderr:\n%s", out, &stderr)

	steps := map[string]map[string]any{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var m map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m), "line %q", sc.Text())
		steps[m["step"].(string)] = m
	}
	require.Contains(t, steps, "watch", "stdout:\n%s", out)
	assert.Equal(t, "ApplicationList", steps["list"]["kind"])
	assert.Equal(t, []any{"js-app"}, steps["list"]["names"])
	require.Contains(t, steps, "created")
	name, _ := steps["created"]["name"].(string)
	assert.Regexp(t, `^js-[a-z0-9]{5}$`, name)
	assert.Equal(t, "Namespace", steps["created"]["kind"])
	assert.Contains(t, steps["namespaces"]["names"], "default")
	assert.Contains(t, steps["namespaces"]["names"], name)
	assert.Equal(t, []any{[]any{"ADDED", "js-app", 1.0}, []any{"MODIFIED", "js-app", 2.0}}, steps["watch"]["events"])
}
