package namespaces_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/namespaces"
	"github.com/opemu/opemu/reconciler"
	"github.com/opemu/opemu/registry"
	"github.com/opemu/opemu/registry/registrytest"
)

// wait bounds what a test waits for the controller (on a loaded 2-core machine).
const wait = 10 * time.Second

func nsKey(name string) cache.Key { return cache.Key{Resource: "namespaces", Name: name} }

func cmKey(ns, name string) cache.Key {
	return cache.Key{Resource: "configmaps", Namespace: ns, Name: name}
}

func podKey(ns, name string) cache.Key { return cache.Key{Resource: "pods", Namespace: ns, Name: name} }

func configMap(name string, finalizers ...string) map[string]any {
	md := map[string]any{"name": name}
	if len(finalizers) > 0 {
		fs := make([]any, len(finalizers))
		for i, f := range finalizers {
			fs[i] = f
		}
		md["finalizers"] = fs
	}
	return map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": md}
}

func pod(name string, finalizers ...string) map[string]any {
	obj := configMap(name, finalizers...)
	obj["kind"] = "Pod"
	obj["spec"] = map[string]any{"containers": []any{map[string]any{"name": "c", "image": "nginx"}}}
	return obj
}

type rig struct {
	t      *testing.T
	client *registry.Client
	store  cache.Interface
	clock  *clocktesting.FakeClock
	ctrl   *namespaces.Controller
}

func newRig(t *testing.T) *rig {
	env := registrytest.New(t, registrytest.Options{})
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	client := env.Registry.Client("namespace-controller")
	ctrl, err := namespaces.New(namespaces.Config{Client: client, Tuning: reconciler.Tuning{Clock: clk}})
	require.NoError(t, err)
	return &rig{t: t, client: client, store: env.Storage, clock: clk, ctrl: ctrl}
}

// newNamespaces creates the namespaces names.
func (r *rig) newNamespaces(names ...string) {
	r.t.Helper()
	for _, name := range names {
		r.create(nsKey(name), map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": name}})
	}
}

func (r *rig) create(key cache.Key, obj map[string]any) {
	r.t.Helper()
	_, err := r.client.Create(context.Background(), key, obj)
	require.NoError(r.t, err)
}

func (r *rig) namespace(name string) (*corev1.Namespace, bool) {
	r.t.Helper()
	obj, err := r.store.Get(context.Background(), nsKey(name))
	if err != nil {
		require.ErrorIs(r.t, err, cache.ErrNotFound)
		return nil, false
	}
	var ns corev1.Namespace
	require.NoError(r.t, json.Unmarshal(obj.Raw(), &ns))
	return &ns, true
}

func (r *rig) dropFinalizers(key cache.Key) {
	r.t.Helper()
	obj, err := r.store.Get(context.Background(), key)
	require.NoError(r.t, err)
	m, err := obj.Decode()
	require.NoError(r.t, err)
	delete(m["metadata"].(map[string]any), "finalizers")
	_, err = r.client.Update(context.Background(), key, m)
	require.NoError(r.t, err)
}

func condition(ns *corev1.Namespace, typ corev1.NamespaceConditionType) corev1.NamespaceCondition {
	for _, c := range ns.Status.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return corev1.NamespaceCondition{}
}

// TestSync: one pass deletes what it can, says what is left in kube's conditions, and the
// pass after the last finalizer went removes the namespace.
func TestSync(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx := context.Background()
	r.newNamespaces("team")
	r.create(cmKey("team", "plain"), configMap("plain"))
	r.create(cmKey("team", "held"), configMap("held", "example.com/hold"))

	done, err := r.ctrl.Sync(ctx, "team")
	require.NoError(t, err)
	assert.True(t, done, "an Active namespace needs nothing")
	_, err = r.store.Get(ctx, cmKey("team", "plain"))
	require.NoError(t, err, "nothing is deleted before the namespace is")

	_, _, err = r.client.Delete(ctx, nsKey("team"), cache.Preconditions{})
	require.NoError(t, err)
	done, err = r.ctrl.Sync(ctx, "team")
	require.NoError(t, err)
	assert.False(t, done)
	_, err = r.store.Get(ctx, cmKey("team", "plain"))
	require.ErrorIs(t, err, cache.ErrNotFound)
	ns, ok := r.namespace("team")
	require.True(t, ok)
	assert.Equal(t, corev1.NamespaceTerminating, ns.Status.Phase)
	want := map[corev1.NamespaceConditionType][3]string{
		corev1.NamespaceDeletionDiscoveryFailure: {"False", "ResourcesDiscovered", "All resources successfully discovered"},
		corev1.NamespaceDeletionGVParsingFailure: {"False", "ParsedGroupVersions", "All legacy kube types successfully parsed"},
		corev1.NamespaceDeletionContentFailure:   {"False", "ContentDeleted", "All content successfully deleted, may be waiting on finalization"},
		corev1.NamespaceContentRemaining:         {"True", "SomeResourcesRemain", "Some resources are remaining: configmaps. has 1 resource instances"},
		corev1.NamespaceFinalizersRemaining:      {"True", "SomeFinalizersRemain", "Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances"},
	}
	require.Len(t, ns.Status.Conditions, len(want))
	for typ, w := range want {
		c := condition(ns, typ)
		assert.Equal(t, w, [3]string{string(c.Status), c.Reason, c.Message}, "%s", typ)
		assert.True(t, c.LastTransitionTime.Equal(&metav1.Time{Time: r.clock.Now()}), "%s transitioned at the pass", typ)
	}
	assert.Equal(t, []corev1.FinalizerName{corev1.FinalizerKubernetes}, ns.Spec.Finalizers)

	r.clock.Step(time.Minute)
	done, err = r.ctrl.Sync(ctx, "team")
	require.NoError(t, err)
	assert.False(t, done)
	again, _ := r.namespace("team")
	assert.Equal(t, ns.ResourceVersion, again.ResourceVersion, "a pass that finds the same writes nothing")

	r.dropFinalizers(cmKey("team", "held"))
	done, err = r.ctrl.Sync(ctx, "team")
	require.NoError(t, err)
	assert.True(t, done)
	_, ok = r.namespace("team")
	assert.False(t, ok, "finalized: the namespace is gone")
}

// TestPodsFirst: while a Pod is left, nothing else in the namespace is deleted.
func TestPodsFirst(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx := context.Background()
	r.newNamespaces("team")
	r.create(podKey("team", "p"), pod("p", "example.com/hold"))
	r.create(cmKey("team", "cm"), configMap("cm"))
	_, _, err := r.client.Delete(ctx, nsKey("team"), cache.Preconditions{})
	require.NoError(t, err)

	_, err = r.ctrl.Sync(ctx, "team")
	require.NoError(t, err)
	_, err = r.store.Get(ctx, cmKey("team", "cm"))
	require.NoError(t, err, "the ConfigMap waits for the Pods")
	ns, _ := r.namespace("team")
	assert.Equal(t, "Some resources are remaining: pods. has 1 resource instances", condition(ns, corev1.NamespaceContentRemaining).Message)

	r.dropFinalizers(podKey("team", "p"))
	done, err := r.ctrl.Sync(ctx, "team")
	require.NoError(t, err)
	assert.True(t, done)
	_, err = r.store.Get(ctx, cmKey("team", "cm"))
	require.ErrorIs(t, err, cache.ErrNotFound)
}

// TestOtherFinalizers: a namespace whose spec.finalizers hold another finalizer keeps it
// after the kubernetes finalizer goes; the controller is done with it.
func TestOtherFinalizers(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx := context.Background()
	r.create(nsKey("team"), map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "team"},
		"spec": map[string]any{"finalizers": []any{"example.com/z"}}})
	_, _, err := r.client.Delete(ctx, nsKey("team"), cache.Preconditions{})
	require.NoError(t, err)
	done, err := r.ctrl.Sync(ctx, "team")
	require.NoError(t, err)
	assert.True(t, done)
	ns, ok := r.namespace("team")
	require.True(t, ok, "example.com/z holds it")
	assert.Equal(t, []corev1.FinalizerName{"example.com/z"}, ns.Spec.Finalizers)
}

// TestRun: running, the controller finishes a deleted namespace at once, and one held by a
// finalizer as soon as the finalizer goes (its watch), with no step of the clock.
func TestRun(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.ctrl.Run(ctx) }()
	defer func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(wait):
			t.Error("Run did not return")
		}
	}()

	r.newNamespaces("empty", "held")
	r.create(cmKey("empty", "cm"), configMap("cm"))
	r.create(cmKey("held", "cm"), configMap("cm", "example.com/hold"))
	for _, name := range []string{"empty", "held"} {
		_, _, err := r.client.Delete(ctx, nsKey(name), cache.Preconditions{})
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { _, ok := r.namespace("empty"); return !ok }, wait, 5*time.Millisecond)
	require.Eventually(t, func() bool {
		ns, ok := r.namespace("held")
		return ok && condition(ns, corev1.NamespaceFinalizersRemaining).Status == corev1.ConditionTrue
	}, wait, 5*time.Millisecond)
	r.dropFinalizers(cmKey("held", "cm"))
	require.Eventually(t, func() bool { _, ok := r.namespace("held"); return !ok }, wait, 5*time.Millisecond,
		"the last finalizer's removal is seen without waiting for the recheck on the (fake) clock")
}
