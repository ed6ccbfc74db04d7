package tools

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/opemu/opemu/test/internal/kubectl"
	"github.com/opemu/opemu/test/internal/process"
)

// The example's kustomizations: kubebuilder's config/default, and an overlay of it.
const (
	kustomizeDefault = "examples/memcached-operator/config/default"
	kustomizeHA      = "examples/memcached-operator/config/overlays/ha"
)

// newKubectl is the real kubectl pointed at o.
func newKubectl(t *testing.T, o *process.Opemu) *kubectl.Kubectl {
	t.Helper()
	kc, err := o.Kubeconfig(opemuBin)
	require.NoError(t, err)
	return kubectl.New(t, kc)
}

// diff runs `kubectl diff` with args and returns its output and whether it found differences
// (exit status 1); any other failure fails the test.
func diff(t *testing.T, k *kubectl.Kubectl, args ...string) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := k.Cmd(ctx, append([]string{"diff"}, args...)...).CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == 1 {
		return string(out), true
	}
	require.NoError(t, err, "kubectl diff %s:\n%s", strings.Join(args, " "), out)
	return string(out), false
}

// TestKustomizeOverlays applies the memcached operator's kustomizations with the real kubectl
// (apply -k, diff -k): kubebuilder's config/default, then its overlay. diff -k shows everything
// before the first apply, nothing after it (the server's dry run of the same apply changes
// nothing), and the overlay's changes alone before the overlay is applied; the manager's
// Deployment rolls out both times.
func TestKustomizeOverlays(t *testing.T) {
	t.Parallel()
	k := newKubectl(t, process.StartOpemuT(t, opemuBin))

	// As on a cluster, kubectl diff of objects in a namespace that does not exist yet fails:
	// the server's dry run of the Namespace creates nothing for the others to go into.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	early, err := k.Cmd(ctx, "diff", "-k", kustomizeDefault).CombinedOutput()
	require.Error(t, err)
	assert.Contains(t, string(early), `namespaces "memcached-operator-system" not found`)
	k.Run("create", "namespace", "memcached-operator-system")

	out, differs := diff(t, k, "-k", kustomizeDefault)
	assert.True(t, differs, "nothing is applied yet")
	assert.Contains(t, out, "+  name: memcached-operator-controller-manager")

	out = k.Run("apply", "-k", kustomizeDefault)
	for _, want := range []string{
		"namespace/memcached-operator-system configured", // created above, without kubectl's annotation
		"customresourcedefinition.apiextensions.k8s.io/memcacheds.cache.example.com created",
		"serviceaccount/memcached-operator-controller-manager created",
		"role.rbac.authorization.k8s.io/memcached-operator-leader-election-role created",
		"clusterrole.rbac.authorization.k8s.io/memcached-operator-manager-role created",
		"rolebinding.rbac.authorization.k8s.io/memcached-operator-leader-election-rolebinding created",
		"clusterrolebinding.rbac.authorization.k8s.io/memcached-operator-manager-rolebinding created",
		"deployment.apps/memcached-operator-controller-manager created",
	} {
		assert.Contains(t, out, want)
	}
	k.Run("-n", "memcached-operator-system", "rollout", "status", "deployment/memcached-operator-controller-manager", "--timeout=60s")
	out, differs = diff(t, k, "-k", kustomizeDefault)
	assert.False(t, differs, "what was applied is what the server's dry run of it gives:\n%s", out)

	out, differs = diff(t, k, "-k", kustomizeHA)
	require.True(t, differs)
	for _, want := range []string{"-  replicas: 1", "+  replicas: 2", "-        image: example.com/memcached-operator:v0.1.0", "+        image: example.com/memcached-operator:v0.2.0", "+    environment: production"} {
		assert.Contains(t, out, want)
	}
	out = k.Run("apply", "-k", kustomizeHA)
	assert.Contains(t, out, "deployment.apps/memcached-operator-controller-manager configured")
	assert.Contains(t, out, "customresourcedefinition.apiextensions.k8s.io/memcacheds.cache.example.com configured")
	k.Run("-n", "memcached-operator-system", "rollout", "status", "deployment/memcached-operator-controller-manager", "--timeout=60s")
	out, differs = diff(t, k, "-k", kustomizeHA)
	assert.False(t, differs, "the overlay is applied:\n%s", out)
	out = k.Run("-n", "memcached-operator-system", "get", "deployment", "memcached-operator-controller-manager",
		"-o", "jsonpath={.status.readyReplicas} {.spec.template.spec.containers[0].image} {.metadata.labels.environment}")
	assert.Equal(t, "2 example.com/memcached-operator:v0.2.0 production", out)
}
