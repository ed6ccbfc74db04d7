package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/opemu/opemu/test/internal/tool"
)

// debianPython is the interpreter Debian's python3-kubernetes is installed for. A python3 found
// on PATH first (pyenv, a virtualenv) may not see it.
const debianPython = "/usr/bin/python3"

// requirePythonClient returns the Python interpreter that imports the kubernetes client. It
// fails the test when CI is set and the client is missing (.ci/run installs the Debian package
// python3-kubernetes), and skips it elsewhere.
func requirePythonClient(t *testing.T) string {
	t.Helper()
	out, err := exec.Command(debianPython, "-c", "import kubernetes; print(kubernetes.__version__)").CombinedOutput()
	if err != nil {
		tool.Missing(t, "the Python client (.ci/run installs the Debian package python3-kubernetes): %v\n%s", err, out)
	}
	t.Logf("python3-kubernetes %s", strings.TrimSpace(string(out)))
	return debianPython
}

// kubeconfigFile writes what `opemu kubeconfig` prints for p into a temporary file, unedited.
func kubeconfigFile(t *testing.T, p *server) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(path, p.kubeconfig(t), 0o600))
	return path
}

// TestPythonClient runs testdata/python_client.py against opemu: a watch sees ADDED and
// MODIFIED (the client sends watch=True), resumes from a resource_version, and typed models
// without apiVersion/kind create a Namespace named by generateName.
func TestPythonClient(t *testing.T) {
	t.Parallel()
	python := requirePythonClient(t)
	p := start(t, "ENABLE_CONTROLLER=false", "ENABLE_LEADER_ELECTION=false")
	steps := runPython(t, python, "python_client.py", p, 90*time.Second)
	require.Contains(t, steps, "watch")
	assert.Equal(t, []any{[]any{"ADDED", "py-app", 1.0}, []any{"MODIFIED", "py-app", 2.0}}, steps["watch"]["events"])
	assert.NotEmpty(t, steps["watch"]["resourceVersion"])
	require.Contains(t, steps, "resume")
	assert.Equal(t, []any{[]any{"MODIFIED", "py-app", 3.0}}, steps["resume"]["events"], "the watch resumes after the version given")
	require.Contains(t, steps, "namespace")
	name, _ := steps["namespace"]["name"].(string)
	assert.Regexp(t, `^py-[a-z0-9]{5}$`, name)
	assert.Equal(t, "Active", steps["namespace"]["phase"])
	require.Contains(t, steps, "namespace-watch")
	assert.Equal(t, []any{[]any{"ADDED", name}}, steps["namespace-watch"]["events"])
}

// TestPythonPods runs testdata/python_pods.py against opemu with its Nodes and controllers:
// what the client's own e2e tests do with Pods (create one, read it until it leaves Pending,
// list, delete it and see it go), a Job whose Pod runs, a Deployment waited for until its
// replicas are ready, and the Nodes read. exec is a declared difference: it fails at once.
func TestPythonPods(t *testing.T) {
	t.Parallel()
	python := requirePythonClient(t)
	p := start(t, "ENABLE_LEADER_ELECTION=false", "ROLLOUT_STEP=100ms")
	steps := runPython(t, python, "python_pods.py", p, 120*time.Second)
	require.Contains(t, steps, "pod")
	pod := steps["pod"]
	assert.Equal(t, "Pending", pod["created_phase"])
	assert.Equal(t, "Running", pod["phase"])
	assert.Equal(t, []any{"True"}, pod["ready"])
	assert.Equal(t, "opemu-control-plane", pod["node"])
	assert.Regexp(t, `^10\.244\.0\.\d+$`, pod["ip"])
	assert.Equal(t, true, pod["started"])
	require.Contains(t, steps, "exec")
	assert.NotNil(t, steps["exec"]["error"], "exec is not served")
	t.Logf("exec: %v", steps["exec"])
	require.Contains(t, steps, "all-pods")
	assert.Positive(t, steps["all-pods"]["count"])
	assert.Contains(t, steps, "pod-deleted")
	require.Contains(t, steps, "job")
	assert.Equal(t, 1.0, steps["job"]["running"])
	require.Contains(t, steps, "deployment")
	assert.Equal(t, 2.0, steps["deployment"]["ready"])
	assert.Equal(t, 2.0, steps["deployment"]["available"])
	assert.Equal(t, []any{"Running", "Running"}, steps["deployment"]["phases"])
	require.Contains(t, steps, "nodes")
	assert.Equal(t, []any{"opemu-control-plane"}, steps["nodes"]["names"])
	assert.Equal(t, true, steps["nodes"]["labelled"])
	assert.Equal(t, []any{"True"}, steps["nodes"]["ready"])
}

// runPython runs testdata/script against p within limit and returns the steps it printed (one
// JSON object a line, keyed by its "step").
func runPython(t *testing.T, python, script string, p *server, limit time.Duration) map[string]map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, filepath.Join("testdata", script), kubeconfigFile(t, p))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "%s:\nstdout:\n%s\nstderr:\n%s", script, out, &stderr)
	steps := map[string]map[string]any{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var m map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m), "line %q", sc.Text())
		steps[m["step"].(string)] = m
	}
	t.Logf("%s printed:\n%s", script, out)
	return steps
}
