package tools

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/opemu/opemu/test/internal/kubectl"
	"github.com/opemu/opemu/test/internal/process"
	"github.com/opemu/opemu/test/internal/tool"
)

// The Helm CLIs .ci/run installs (go install into <user cache>/opemu-tools/helm-<version>).
var helmVersions = []string{"v3.22.0", "v4.3.1"}

// The chart of the memcached operator, from the repository's root (where helm runs).
const chart = "examples/memcached-operator/chart"

// helmTestStage is the kwok Stage that ends Helm's test Pods as a passing test would.
const helmTestStage = "examples/stages/helm-test-pods.yaml"

// helmCLI runs one Helm CLI against one opemu, with HOME and Helm's directories of its own.
type helmCLI struct {
	t    *testing.T
	path string
	env  []string
	dir  string
}

// newHelm is the Helm of version (failing the test in CI, skipping it elsewhere, when .ci/run
// has not installed it) pointed at k's kubeconfig.
func newHelm(t *testing.T, version string, k *kubectl.Kubectl) *helmCLI {
	t.Helper()
	cache, err := os.UserCacheDir()
	require.NoError(t, err)
	path := filepath.Join(cache, "opemu-tools", "helm-"+version, "helm")
	if _, err := os.Stat(path); err != nil {
		tool.Missing(t, "Helm %s (.ci/run installs it with go install): %v", version, err)
	}
	home := t.TempDir()
	env := append(os.Environ(), "HOME="+home, "KUBECONFIG="+k.Kubeconfig,
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"), "HELM_CONFIG_HOME="+filepath.Join(home, "config"), "HELM_DATA_HOME="+filepath.Join(home, "data"))
	return &helmCLI{t: t, path: path, env: env, dir: tool.Repo(t)}
}

// cmd is helm with args, not started, bound to ctx.
func (h *helmCLI) cmd(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, h.path, args...)
	cmd.Env, cmd.Dir = h.env, h.dir
	return cmd
}

// run runs helm and returns its standard output, failing the test on a non-zero exit or after
// two minutes (its own --timeout flags are shorter).
func (h *helmCLI) run(args ...string) string {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	cmd := h.cmd(ctx, args...)
	cmd.Stderr = &stderr
	began := time.Now()
	out, err := cmd.Output()
	require.NoError(h.t, err, "helm %s:\n%s\n%s", strings.Join(args, " "), out, stderr.String())
	h.t.Logf("helm %s: %v", args[0], time.Since(began).Round(time.Millisecond))
	return string(out)
}

// TestHelm drives the memcached operator's chart through a release's life with Helm v3 and v4,
// each against an opemu of its own: install --wait (the Deployment's ReplicaSet and Pods become
// ready), upgrade --wait (the webhook certificate, generated with lookup, is kept), history,
// rollback, test (its hook Pod runs to Succeeded), uninstall, and template piped to kubectl
// apply --server-side; the release Secrets are Helm's (type helm.sh/release.v1, its labels,
// the release gzipped in them).
func TestHelm(t *testing.T) {
	t.Parallel()
	for _, version := range helmVersions {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			k := newKubectl(t, process.StartOpemuT(t, opemuBin))
			h := newHelm(t, version, k)
			const ns = "operators"
			deployment := func() string {
				return k.Run("-n", ns, "get", "deployment", "demo-memcached-operator", "-o",
					"jsonpath={.spec.replicas} {.status.readyReplicas} {.status.updatedReplicas}")
			}

			out := h.run("install", "demo", chart, "-n", ns, "--create-namespace", "--wait", "--timeout", "90s")
			assert.Contains(t, out, "STATUS: deployed")
			assert.Equal(t, "1 1 1", deployment(), "install --wait returned with the Deployment ready")
			assertRelease(t, k, ns, "demo", 1, "deployed")
			tlsCrt := k.Run("-n", ns, "get", "secret", "demo-memcached-operator-webhook-tls", "-o", "jsonpath={.data.tls\\.crt}")
			require.NotEmpty(t, tlsCrt)
			caBundle := k.Run("get", "validatingwebhookconfiguration", "demo-memcached-operator", "-o", "jsonpath={.webhooks[0].clientConfig.caBundle}")
			assert.Equal(t, k.Run("-n", ns, "get", "secret", "demo-memcached-operator-webhook-tls", "-o", "jsonpath={.data.ca\\.crt}"), caBundle)

			out = h.run("upgrade", "demo", chart, "-n", ns, "--set", "replicas=2", "--wait", "--timeout", "90s")
			assert.Contains(t, out, "REVISION: 2")
			assert.Equal(t, "2 2 2", deployment())
			assertRelease(t, k, ns, "demo", 2, "deployed")
			assertRelease(t, k, ns, "demo", 1, "superseded")
			assert.Equal(t, tlsCrt, k.Run("-n", ns, "get", "secret", "demo-memcached-operator-webhook-tls", "-o", "jsonpath={.data.tls\\.crt}"),
				"lookup found the certificate: the upgrade kept it")

			out = h.run("rollback", "demo", "1", "-n", ns, "--wait", "--timeout", "90s")
			assert.Contains(t, out, "Rollback was a success")
			assert.Equal(t, "1 1 1", deployment())
			var history []struct {
				Revision    int    `json:"revision"`
				Status      string `json:"status"`
				Description string `json:"description"`
			}
			require.NoError(t, json.Unmarshal([]byte(h.run("history", "demo", "-n", ns, "-o", "json")), &history))
			require.Len(t, history, 3)
			assert.Equal(t, []string{"superseded", "superseded", "deployed"}, []string{history[0].Status, history[1].Status, history[2].Status})
			assert.Equal(t, "Rollback to 1", history[2].Description)

			helmTest(t, h, k, ns)

			out = h.run("uninstall", "demo", "-n", ns, "--wait", "--timeout", "90s")
			assert.Contains(t, out, `release "demo" uninstalled`)
			assert.Empty(t, k.Run("-n", ns, "get", "secrets,deployments,serviceaccounts,roles", "-o", "name"), "the release's objects and Secrets are gone")
			assert.Empty(t, k.Run("get", "clusterroles,validatingwebhookconfigurations", "-l", "app.kubernetes.io/instance=demo", "-o", "name"))
			assert.Equal(t, "customresourcedefinition.apiextensions.k8s.io/memcacheds.cache.example.com\n",
				k.Run("get", "crd", "memcacheds.cache.example.com", "-o", "name"), "Helm leaves the CRDs of crds/ installed")

			rendered := h.run("template", "again", chart, "-n", ns, "--include-crds")
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			apply := k.Cmd(ctx, "apply", "--server-side", "-n", ns, "-f", "-")
			apply.Stdin = strings.NewReader(rendered)
			b, err := apply.CombinedOutput()
			require.NoError(t, err, "helm template | kubectl apply --server-side:\n%s", b)
			for _, want := range []string{"customresourcedefinition.apiextensions.k8s.io/memcacheds.cache.example.com serverside-applied",
				"deployment.apps/again-memcached-operator serverside-applied", "secret/again-memcached-operator-webhook-tls serverside-applied",
				"pod/again-memcached-operator-test serverside-applied"} {
				assert.Contains(t, string(b), want)
			}
			k.Run("-n", ns, "rollout", "status", "deployment/again-memcached-operator", "--timeout=60s")
		})
	}
}

// helmTest runs `helm test demo`: its hook Pod (restartPolicy Never) is created, runs and must
// succeed. opemu's kubelets, as kwok's default stages, end only the Pods of Jobs; the kwok
// Stage examples/stages/helm-test-pods.yaml, applied as a user would, ends a running Helm hook
// Pod with its containers exiting 0, and Helm, watching, reports the test passed.
func helmTest(t *testing.T, h *helmCLI, k *kubectl.Kubectl, ns string) {
	t.Helper()
	assert.Contains(t, k.Run("apply", "-f", helmTestStage), "stage.kwok.x-k8s.io/helm-test-pods")
	out := h.run("test", "demo", "-n", ns, "--timeout", "90s")
	const pod = "demo-memcached-operator-test"
	assert.Contains(t, out, "TEST SUITE:     "+pod)
	assert.Contains(t, out, "Phase:          Succeeded")
	assert.Equal(t, "Succeeded Completed", k.Run("-n", ns, "get", "pod", pod, "-o",
		"jsonpath={.status.phase} {.status.containerStatuses[0].state.terminated.reason}"))
}

// assertRelease checks the Secret Helm stores revision of release in: its name, type and labels,
// and the release itself in it (base64 of gzipped JSON) with that name, revision and status.
func assertRelease(t *testing.T, k *kubectl.Kubectl, ns, release string, revision int, status string) {
	t.Helper()
	name := "sh.helm.release.v1." + release + ".v" + strconv.Itoa(revision)
	var s corev1.Secret
	require.NoError(t, json.Unmarshal([]byte(k.Run("-n", ns, "get", "secret", name, "-o", "json")), &s))
	assert.Equal(t, corev1.SecretType("helm.sh/release.v1"), s.Type)
	labels := maps.Clone(s.Labels)
	delete(labels, "modifiedAt") // when Helm last wrote it
	assert.Equal(t, map[string]string{"owner": "helm", "name": release, "status": status, "version": strconv.Itoa(revision)}, labels)
	gz, err := base64.StdEncoding.DecodeString(string(s.Data["release"]))
	require.NoError(t, err)
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	require.NoError(t, err)
	raw, err := io.ReadAll(zr)
	require.NoError(t, err)
	var rel struct {
		Name    string `json:"name"`
		Version int    `json:"version"`
		Info    struct {
			Status string `json:"status"`
		} `json:"info"`
		Chart struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		} `json:"chart"`
	}
	require.NoError(t, json.Unmarshal(raw, &rel))
	assert.Equal(t, release, rel.Name)
	assert.Equal(t, revision, rel.Version)
	assert.Equal(t, status, rel.Info.Status)
	assert.Equal(t, "memcached-operator", rel.Chart.Metadata.Name)
}

// TestChartCRDIsTheExample: the chart's crds/ holds the CRD controller-gen generates for the
// example (config/crd/bases), unchanged (Helm installs crds/ as they are, never templated).
func TestChartCRDIsTheExample(t *testing.T) {
	t.Parallel()
	const file = "cache.example.com_memcacheds.yaml"
	want, err := os.ReadFile(filepath.Join(exampleDir, "config", "crd", "bases", file))
	require.NoError(t, err)
	got, err := os.ReadFile(filepath.Join(exampleDir, "chart", "crds", file))
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got), "copy config/crd/bases/%s into the chart's crds/", file)
}
