package gc_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/events"
	"github.com/opemu/opemu/gc"
	"github.com/opemu/opemu/registry"
	"github.com/opemu/opemu/registry/registrytest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// recorder keeps the Events the collector records.
type recorder struct {
	mu     sync.Mutex
	events []events.Event
}

func (r *recorder) Record(_ context.Context, ev events.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, ev)
}

func (r *recorder) reasons(name string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, ev := range r.events {
		if ev.Object.Name == name {
			out = append(out, ev.Reason+": "+ev.Message)
		}
	}
	return out
}

// rig is the write path with a running collector.
type rig struct {
	t      *testing.T
	env    *registrytest.Env
	reg    *registry.Store
	client *registry.Client
	events *recorder
}

const wait = 10 * time.Second

var ctx = context.Background()

// newRig wires the write path and runs a collector over it until the test ends (run false:
// the caller runs it).
func newRig(t *testing.T, run bool) (*rig, *gc.Collector) {
	env := registrytest.New(t, registrytest.Options{})
	r := &rig{t: t, env: env, reg: env.Registry, client: env.Registry.Client("test"), events: &recorder{}}
	c, err := gc.New(gc.Config{Client: env.Registry.Client("garbage-collector"), Kinds: env.Kinds, Events: r.events})
	require.NoError(t, err)
	if run {
		r.run(t, c)
	}
	return r, c
}

// run runs c until the test ends.
func (r *rig) run(t *testing.T, c *gc.Collector) {
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = c.Run(cctx); close(done) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(wait):
			t.Error("the collector did not stop")
		}
	})
}

func cmKey(ns, name string) cache.Key {
	return cache.Key{Resource: "configmaps", Namespace: ns, Name: name}
}

// owner is an ownerReference to obj (a ConfigMap unless kind says otherwise).
func owner(obj *cache.Object, block bool) map[string]any {
	k := obj.Key()
	av, kind := "v1", "ConfigMap"
	if k.Resource == "clusterroles" {
		av, kind = "rbac.authorization.k8s.io/v1", "ClusterRole"
	}
	return map[string]any{"apiVersion": av, "kind": kind, "name": k.Name, "uid": obj.UID(), "blockOwnerDeletion": block}
}

// configMap creates a ConfigMap owned by owners, with finalizers.
func (r *rig) configMap(ns, name string, owners []map[string]any, finalizers ...string) *cache.Object {
	r.t.Helper()
	md := map[string]any{"name": name}
	if len(owners) > 0 {
		refs := make([]any, len(owners))
		for i, o := range owners {
			refs[i] = o
		}
		md["ownerReferences"] = refs
	}
	if len(finalizers) > 0 {
		fs := make([]any, len(finalizers))
		for i, f := range finalizers {
			fs[i] = f
		}
		md["finalizers"] = fs
	}
	o, err := r.client.Create(ctx, cmKey(ns, name), map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": md, "data": map[string]any{"k": "v"}})
	require.NoError(r.t, err)
	return o
}

// delete deletes key with policy, as a client's DELETE does.
func (r *rig) delete(key cache.Key, policy metav1.DeletionPropagation) {
	r.t.Helper()
	t, err := r.reg.TargetOf(key)
	require.NoError(r.t, err)
	_, _, err = r.reg.Delete(ctx, t, cache.Preconditions{}, registry.Options{PropagationPolicy: policy})
	require.NoError(r.t, err)
}

func (r *rig) get(key cache.Key) (*cache.Object, bool) {
	o, err := r.client.Get(ctx, key)
	if err != nil {
		require.ErrorIs(r.t, err, cache.ErrNotFound)
		return nil, false
	}
	return o, true
}

func (r *rig) gone(key cache.Key) bool {
	_, ok := r.get(key)
	return !ok
}

// settle waits until the collector has caught up with the writes made so far: it creates a
// dependent of an owner that never existed and waits for its collection (the collector looks
// at objects in the order it sees them).
func (r *rig) settle(ns string) {
	r.t.Helper()
	probe := r.configMap(ns, "probe", []map[string]any{{"apiVersion": "v1", "kind": "ConfigMap", "name": "never", "uid": "0b8c5a8e-0000-4000-8000-00000000ffff"}})
	require.Eventually(r.t, func() bool { return r.gone(probe.Key()) }, wait, 5*time.Millisecond)
}

// ownerUIDs are the uids obj's ownerReferences name.
func ownerUIDs(t *testing.T, obj *cache.Object) []string {
	m, err := obj.Decode()
	require.NoError(t, err)
	refs, _ := m["metadata"].(map[string]any)["ownerReferences"].([]any)
	out := []string{}
	for _, r := range refs {
		out = append(out, r.(map[string]any)["uid"].(string))
	}
	return out
}

// removeFinalizers lets an object held by a test's finalizer go.
func (r *rig) removeFinalizers(key cache.Key) {
	r.t.Helper()
	o, ok := r.get(key)
	require.True(r.t, ok)
	m, err := o.Decode()
	require.NoError(r.t, err)
	md := m["metadata"].(map[string]any)
	var kept []any
	for _, f := range o.Finalizers() {
		if f == metav1.FinalizerOrphanDependents || f == metav1.FinalizerDeleteDependents {
			kept = append(kept, f)
		}
	}
	md["finalizers"] = kept
	_, err = r.client.Update(ctx, key, m)
	require.NoError(r.t, err)
}

// TestBackground: deleting an owner (the default policy) deletes the dependents whose every
// owner is gone; a dependent with an owner left only loses the reference.
func TestBackground(t *testing.T) {
	t.Parallel()
	r, _ := newRig(t, true)
	a := r.configMap("default", "a", nil)
	b := r.configMap("default", "b", nil)
	for i := range 3 {
		r.configMap("default", fmt.Sprint("only-a-", i), []map[string]any{owner(a, false)})
	}
	both := r.configMap("default", "both", []map[string]any{owner(a, false), owner(b, true)})
	unrelated := r.configMap("default", "unrelated", nil)

	r.delete(a.Key(), "")
	assert.True(t, r.gone(a.Key()), "Background removes the owner at once")
	require.Eventually(t, func() bool {
		return r.gone(cmKey("default", "only-a-0")) && r.gone(cmKey("default", "only-a-1")) && r.gone(cmKey("default", "only-a-2"))
	}, wait, 5*time.Millisecond)
	require.Eventually(t, func() bool {
		o, ok := r.get(both.Key())
		return ok && len(ownerUIDs(t, o)) == 1
	}, wait, 5*time.Millisecond)
	o, _ := r.get(both.Key())
	assert.Equal(t, []string{b.UID()}, ownerUIDs(t, o), "the reference to the owner that went is removed, the other kept")
	_, ok := r.get(unrelated.Key())
	assert.True(t, ok)

	r.delete(b.Key(), metav1.DeletePropagationBackground)
	require.Eventually(t, func() bool { return r.gone(both.Key()) }, wait, 5*time.Millisecond)
}

// TestForeground: the owner is marked with foregroundDeletion and stays until its
// blockOwnerDeletion dependents are gone; every dependent is deleted, a dependent with
// dependents of its own in the foreground too.
func TestForeground(t *testing.T) {
	t.Parallel()
	r, _ := newRig(t, true)
	top := r.configMap("default", "top", nil)
	held := r.configMap("default", "held", []map[string]any{owner(top, true)}, "example.com/hold")
	free := r.configMap("default", "free", []map[string]any{owner(top, false)})
	mid := r.configMap("default", "mid", []map[string]any{owner(top, true)})
	leaf := r.configMap("default", "leaf", []map[string]any{owner(mid, true)})

	r.delete(top.Key(), metav1.DeletePropagationForeground)
	o, ok := r.get(top.Key())
	require.True(t, ok)
	assert.True(t, o.Deleting())
	assert.Contains(t, o.Finalizers(), metav1.FinalizerDeleteDependents)

	require.Eventually(t, func() bool {
		return r.gone(free.Key()) && r.gone(mid.Key()) && r.gone(leaf.Key())
	}, wait, 5*time.Millisecond, "every dependent, and the dependent's dependent, is deleted")
	h, ok := r.get(held.Key())
	require.True(t, ok, "held by its own finalizer")
	assert.True(t, h.Deleting())
	o, ok = r.get(top.Key())
	require.True(t, ok, "the owner waits for its blocking dependent")
	assert.Contains(t, o.Finalizers(), metav1.FinalizerDeleteDependents)

	r.removeFinalizers(held.Key())
	require.Eventually(t, func() bool { return r.gone(top.Key()) }, wait, 5*time.Millisecond, "the owner goes after its last blocking dependent")
}

// TestForegroundNonBlocking: an owner whose dependents do not block it goes at once; they are
// deleted too.
func TestForegroundNonBlocking(t *testing.T) {
	t.Parallel()
	r, _ := newRig(t, true)
	top := r.configMap("default", "top", nil)
	dep := r.configMap("default", "dep", []map[string]any{owner(top, false)}, "example.com/hold")
	r.delete(top.Key(), metav1.DeletePropagationForeground)
	require.Eventually(t, func() bool { return r.gone(top.Key()) }, wait, 5*time.Millisecond)
	require.Eventually(t, func() bool {
		o, ok := r.get(dep.Key())
		return ok && o.Deleting()
	}, wait, 5*time.Millisecond, "the dependent is deleted (its own finalizer holds it)")
}

// TestOrphan: the dependents stay, without their references to the owner; the owner goes.
func TestOrphan(t *testing.T) {
	t.Parallel()
	r, _ := newRig(t, true)
	a := r.configMap("default", "a", nil)
	b := r.configMap("default", "b", nil)
	one := r.configMap("default", "one", []map[string]any{owner(a, true)})
	two := r.configMap("default", "two", []map[string]any{owner(a, false), owner(b, false)})

	r.delete(a.Key(), metav1.DeletePropagationOrphan)
	require.Eventually(t, func() bool { return r.gone(a.Key()) }, wait, 5*time.Millisecond)
	o, ok := r.get(one.Key())
	require.True(t, ok, "orphaned, not deleted")
	assert.Empty(t, ownerUIDs(t, o))
	o, ok = r.get(two.Key())
	require.True(t, ok)
	assert.Equal(t, []string{b.UID()}, ownerUIDs(t, o))

	// The orphan finalizer set by the object itself is honoured without a policy.
	c := r.configMap("default", "c", nil, metav1.FinalizerOrphanDependents)
	three := r.configMap("default", "three", []map[string]any{owner(c, false)})
	r.delete(c.Key(), "")
	require.Eventually(t, func() bool { return r.gone(c.Key()) }, wait, 5*time.Millisecond)
	o, ok = r.get(three.Key())
	require.True(t, ok)
	assert.Empty(t, ownerUIDs(t, o))
}

// TestDanglingOwners: a dependent whose owner does not exist (no object of that name, or one
// with another uid) is collected; so is one whose owner's kind is served but was never made.
func TestDanglingOwners(t *testing.T) {
	t.Parallel()
	r, _ := newRig(t, true)
	other := r.configMap("default", "other", nil)
	r.configMap("default", "no-such-name", []map[string]any{{"apiVersion": "v1", "kind": "ConfigMap", "name": "missing", "uid": "0b8c5a8e-0000-4000-8000-000000000001"}})
	r.configMap("default", "wrong-uid", []map[string]any{{"apiVersion": "v1", "kind": "ConfigMap", "name": "other", "uid": "0b8c5a8e-0000-4000-8000-000000000002"}})
	kept := r.configMap("default", "kept", []map[string]any{owner(other, false)})
	unserved := r.configMap("default", "unserved", []map[string]any{{"apiVersion": "example.com/v1", "kind": "Nope", "name": "x", "uid": "0b8c5a8e-0000-4000-8000-000000000003"}})
	require.Eventually(t, func() bool {
		return r.gone(cmKey("default", "no-such-name")) && r.gone(cmKey("default", "wrong-uid"))
	}, wait, 5*time.Millisecond)
	_, ok := r.get(kept.Key())
	assert.True(t, ok, "an owner that exists keeps its dependent")
	_, ok = r.get(unserved.Key())
	assert.True(t, ok, "an owner of a kind not served is not judged absent")
}

// TestDanglingAtStart: owners that went while the collector was not running (not leading):
// its first list is a full resync, and their dependents are collected.
func TestDanglingAtStart(t *testing.T) {
	t.Parallel()
	r, c := newRig(t, false)
	a := r.configMap("default", "a", nil)
	dep := r.configMap("default", "dep", []map[string]any{owner(a, false)})
	orphan := r.configMap("default", "orphan-owner", nil)
	kid := r.configMap("default", "kid", []map[string]any{owner(orphan, false)})
	r.delete(a.Key(), "")
	r.delete(orphan.Key(), metav1.DeletePropagationOrphan)
	_, ok := r.get(dep.Key())
	require.True(t, ok, "nothing collects: no collector runs")

	r.run(t, c)
	require.Eventually(t, func() bool { return r.gone(dep.Key()) && r.gone(orphan.Key()) }, wait, 5*time.Millisecond)
	o, ok := r.get(kid.Key())
	require.True(t, ok)
	assert.Empty(t, ownerUIDs(t, o))
}

// TestInvalidReferences: a namespaced dependent naming an owner in another namespace counts it
// as absent (Kubernetes looks for it in the dependent's namespace) and is collected; a
// cluster-scoped dependent naming a namespaced kind is never collected through it. Both are
// reported with a Warning Event on the dependent.
func TestInvalidReferences(t *testing.T) {
	t.Parallel()
	r, _ := newRig(t, true)
	r.env.Namespaces(t, "team-a", "team-b")
	elsewhere := r.configMap("team-a", "owner", nil)
	local := r.configMap("team-b", "local", nil)
	r.configMap("team-b", "cross", []map[string]any{owner(elsewhere, true)})
	mixed := r.configMap("team-b", "mixed", []map[string]any{owner(elsewhere, false), owner(local, false)})
	cluster, err := r.client.Create(ctx, cache.Key{Group: "rbac.authorization.k8s.io", Resource: "clusterroles", Name: "cluster-dep"}, map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
		"metadata": map[string]any{"name": "cluster-dep", "ownerReferences": []any{owner(local, false)}},
	})
	require.NoError(t, err)

	require.Eventually(t, func() bool { return r.gone(cmKey("team-b", "cross")) }, wait, 5*time.Millisecond)
	require.Eventually(t, func() bool {
		o, ok := r.get(mixed.Key())
		return ok && len(ownerUIDs(t, o)) == 1
	}, wait, 5*time.Millisecond)
	o, _ := r.get(mixed.Key())
	assert.Equal(t, []string{local.UID()}, ownerUIDs(t, o), "the invalid reference is removed, the valid owner keeps it")
	want := fmt.Sprintf(`OwnerRefInvalidNamespace: ownerRef [v1/ConfigMap, namespace: team-b, name: owner, uid: %s] does not exist in namespace "team-b"`, elsewhere.UID())
	assert.Contains(t, r.events.reasons("cross"), want)
	assert.Contains(t, r.events.reasons("mixed"), want)

	require.Eventually(t, func() bool { return len(r.events.reasons("cluster-dep")) > 0 }, wait, 5*time.Millisecond)
	assert.Equal(t, fmt.Sprintf(`OwnerRefInvalidNamespace: ownerRef [v1/ConfigMap, namespace: , name: local, uid: %s] does not exist in namespace ""`, local.UID()),
		r.events.reasons("cluster-dep")[0])
	r.delete(local.Key(), "")
	require.Eventually(t, func() bool { return r.gone(mixed.Key()) }, wait, 5*time.Millisecond)
	_, ok := r.get(cluster.Key())
	assert.True(t, ok, "a cluster-scoped dependent of a namespaced kind is never collected")

	// A cluster-scoped owner of a namespaced dependent is valid.
	role, err := r.client.Create(ctx, cache.Key{Group: "rbac.authorization.k8s.io", Resource: "clusterroles", Name: "role"}, map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": map[string]any{"name": "role"},
	})
	require.NoError(t, err)
	owned := r.configMap("team-b", "owned-by-role", []map[string]any{owner(role, false)})
	r.settle("team-b")
	_, ok = r.get(owned.Key())
	require.True(t, ok)
	assert.Empty(t, r.events.reasons("owned-by-role"))
	r.delete(role.Key(), "")
	require.Eventually(t, func() bool { return r.gone(owned.Key()) }, wait, 5*time.Millisecond)
}

// TestThousandDependents deletes an owner with 1,000 dependents, each policy in turn; the
// collector finishes within a bound (far above what it takes: the figure is in
// BenchmarkCollectDependents).
func TestThousandDependents(t *testing.T) {
	t.Parallel()
	for _, policy := range []metav1.DeletionPropagation{metav1.DeletePropagationBackground, metav1.DeletePropagationForeground, metav1.DeletePropagationOrphan} {
		t.Run(string(policy), func(t *testing.T) {
			t.Parallel()
			r, _ := newRig(t, true)
			ns := "many"
			r.env.Namespaces(t, ns)
			top := r.configMap(ns, "owner", nil)
			for i := range 1000 {
				r.configMap(ns, fmt.Sprintf("dep-%04d", i), []map[string]any{owner(top, true)})
			}
			start := time.Now()
			r.delete(top.Key(), policy)
			require.Eventually(t, func() bool { return r.gone(top.Key()) }, 30*time.Second, 10*time.Millisecond)
			left, err := r.client.List(ctx, cache.GroupResource{Resource: "configmaps"}, cache.InNamespace(ns))
			require.NoError(t, err)
			if policy == metav1.DeletePropagationOrphan {
				assert.Len(t, left.Items, 1000)
				for _, o := range left.Items {
					assert.Empty(t, ownerUIDs(t, o))
				}
				return
			}
			require.Eventually(t, func() bool {
				l, err := r.client.List(ctx, cache.GroupResource{Resource: "configmaps"}, cache.InNamespace(ns))
				return err == nil && len(l.Items) == 0
			}, 30*time.Second, 10*time.Millisecond)
			t.Logf("%s: 1,000 dependents collected in %v", policy, time.Since(start))
		})
	}
}

// TestForegroundCycle: two objects owning each other, blocking: deleting one in the foreground
// deletes both, as Kubernetes does (the dependent waiting on its own dependent stops blocking).
func TestForegroundCycle(t *testing.T) {
	t.Parallel()
	r, _ := newRig(t, true)
	a := r.configMap("default", "a", nil)
	b := r.configMap("default", "b", []map[string]any{owner(a, true)})
	m, err := a.Decode()
	require.NoError(t, err)
	m["metadata"].(map[string]any)["ownerReferences"] = []any{owner(b, true)}
	_, err = r.client.Update(ctx, a.Key(), m)
	require.NoError(t, err)
	r.settle("default")

	r.delete(a.Key(), metav1.DeletePropagationForeground)
	require.Eventually(t, func() bool { return r.gone(a.Key()) && r.gone(b.Key()) }, wait, 5*time.Millisecond)
}
