package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/opemu/opemu/calls"
	cachev1alpha1 "github.com/opemu/opemu/examples/memcached-operator/api/v1alpha1"
	"github.com/opemu/opemu/testenv"
)

// The record of calls (SPEC §21) on the operator: the exact writes of the reconcile that scales
// a Memcached; the least-privilege Role generated from what the manager did is within what its
// kubebuilder markers allow, and, applied with kubectl to a new environment with RBAC on, is
// all the manager needs.
func TestOperatorCalls(t *testing.T) {
	t.Parallel()
	env, logs := runAsMarkers(t)
	ctx := t.Context()
	c, err := client.New(env.Config, client.Options{Scheme: scheme()})
	require.NoError(t, err)
	key := types.NamespacedName{Namespace: "cache", Name: "cache"}

	// Settled: the Deployment has its size and the conditions say so.
	m := &cachev1alpha1.Memcached{}
	require.Eventually(t, func() bool { return settled(ctx, c, key, m) }, wait, 10*time.Millisecond, "not settled; the manager's log:\n%s", logs)

	// One reconcile scales the Deployment and says so in the status; the next sees it done.
	since := time.Now()
	require.NoError(t, c.Patch(ctx, m, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"size":3}}`))))
	require.Eventually(t, func() bool { return settled(ctx, c, key, m) && ptr.Deref(m.Spec.Size, 0) == 3 }, wait, 10*time.Millisecond,
		"not settled at size 3; the manager's log:\n%s", logs)
	writes := env.Calls(calls.Filter{User: serviceAccount, Since: since, Writes: true})
	var ok, events []calls.Call
	for _, w := range writes {
		switch {
		case w.Resource == "events":
			events = append(events, w)
		case w.Code < 300:
			ok = append(ok, w)
		default:
			// The only failure a reconcile may meet here: its cache was behind a write.
			assert.Equal(t, int32(409), w.Code, "%s", testenv.Describe(w))
		}
	}
	testenv.ExactCalls(t, ok,
		"update apps/deployments cache/cache",
		"update cache.example.com/memcacheds/status cache/cache", // Progressing: Scaling
		"update cache.example.com/memcacheds/status cache/cache", // Available, Progressing False
	)
	require.Eventually(t, func() bool {
		events = env.Calls(calls.Filter{User: serviceAccount, Since: since, Writes: true, Resource: "events.k8s.io/events"})
		return len(events) == 1
	}, wait, 10*time.Millisecond, "the Scaled event")
	assert.Equal(t, "create", events[0].Verb)

	// The least privilege: within the markers' ClusterRole, rule by rule.
	roles := env.Roles(serviceAccount, calls.RoleOptions{Name: "memcached-observed"})
	raw, err := os.ReadFile(filepath.Join("config", "rbac", "role.yaml"))
	require.NoError(t, err)
	var markers rbacv1.ClusterRole
	require.NoError(t, yaml.Unmarshal(raw, &markers))
	require.NotEmpty(t, roles.Namespace)
	for ns, rules := range roles.Namespace {
		for _, r := range rules {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					assert.True(t, allows(markers.Rules, r.APIGroups[0], res, v), "generated %s %s/%s in %q is not in the markers", v, r.APIGroups[0], res, ns)
				}
			}
		}
	}
	assert.Empty(t, roles.Forbidden)
	y, err := roles.YAML()
	require.NoError(t, err)
	t.Logf("generated:\n%s", y)

	// Applied with kubectl to a new environment, the generated roles are all the manager needs.
	runManager(t, func(env2 *testenv.Environment, _ *kubernetes.Clientset) {
		kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
		require.NoError(t, os.WriteFile(kubeconfig, env2.KubeConfig, 0o600))
		cmd := exec.CommandContext(ctx, "kubectl", "--kubeconfig", kubeconfig, "apply", "-f", "-")
		cmd.Stdin = bytes.NewReader(y)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "kubectl apply:\n%s\nof:\n%s", out, y)
	}, func() bool { return true })
}

// runAsMarkers runs the manager as its ServiceAccount with the markers' ClusterRole.
func runAsMarkers(t *testing.T) (*testenv.Environment, *logBuffer) {
	t.Helper()
	return runManager(t, func(_ *testenv.Environment, admin *kubernetes.Clientset) {
		bindMarkers(t, admin, func(*rbacv1.ClusterRole) {})
	}, func() bool { return true })
}

// settled reports whether the Memcached at key is reconciled: its Deployment has its size and
// its Available condition is True for its generation.
func settled(ctx context.Context, c client.Client, key types.NamespacedName, m *cachev1alpha1.Memcached) bool {
	dep := &appsv1.Deployment{}
	if c.Get(ctx, key, m) != nil || c.Get(ctx, key, dep) != nil {
		return false
	}
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != ptr.Deref(m.Spec.Size, cachev1alpha1.DefaultSize) {
		return false
	}
	for _, cond := range m.Status.Conditions {
		if cond.Type == "Available" && cond.Status == metav1.ConditionTrue && cond.ObservedGeneration == m.Generation {
			return true
		}
	}
	return false
}

// scheme is the manager's: client-go's kinds and the Memcached.
func scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(cachev1alpha1.AddToScheme(s))
	return s
}

// allows reports whether rules allow verb on group/resource (no wildcards in the markers).
func allows(rules []rbacv1.PolicyRule, group, resource, verb string) bool {
	return slices.ContainsFunc(rules, func(r rbacv1.PolicyRule) bool {
		return slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb)
	})
}
