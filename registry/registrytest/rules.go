package registrytest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/cache/cachetest"
	"github.com/opemu/opemu/registry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NewStorage makes a fresh store for one case of RunRules.
type NewStorage func(t *testing.T) cache.Interface

// Widgets is the resource RunRules writes: a namespaced custom resource without a schema of
// its own (every field kept), so the rules are checked apart from any kind's.
var Widgets = cache.GroupResource{Group: "test.opemu.dev", Resource: "widgets"}

// WidgetCRD defines Widgets.
const WidgetCRD = `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
"metadata":{"name":"widgets.test.opemu.dev"},
"spec":{"group":"test.opemu.dev","scope":"Namespaced","names":{"kind":"Widget","plural":"widgets"},
"versions":[{"name":"v1","served":true,"storage":true,
"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}`

// WidgetKey is the key of Widget name in namespace ns.
func WidgetKey(ns, name string) cache.Key {
	return cache.Key{Group: Widgets.Group, Resource: Widgets.Resource, Namespace: ns, Name: name}
}

// Widget builds a Widget object.
func Widget(name string, replicas int) map[string]any {
	return map[string]any{
		"apiVersion": "test.opemu.dev/v1",
		"kind":       "Widget",
		"metadata":   map[string]any{"name": name},
		"spec":       map[string]any{"replicas": json.Number(fmt.Sprint(replicas))},
	}
}

// RunRules checks the rules of objects the write path keeps over any store (SPEC §2):
// server-owned metadata, generateName, update preconditions, generation, finalizers, the
// garbage collector's finalizers a delete's propagation policy sets, dry runs, creates into
// a missing namespace and namespace deletion.
func RunRules(t *testing.T, newStorage NewStorage) {
	cases := []struct {
		name string
		fn   func(t *testing.T, r *rig)
	}{
		{"CreateStampsMetadata", testCreateStamps},
		{"GenerateName", testGenerateName},
		{"UpdatePreconditions", testUpdatePreconditions},
		{"Generation", testGeneration},
		{"NoOpUpdate", testNoOpUpdate},
		{"Finalizers", testFinalizers},
		{"DeletePropagation", testDeletePropagation},
		{"DryRun", testDryRun},
		{"MissingNamespace", testMissingNamespace},
		{"NamespaceDeletion", testNamespaceDeletion},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.fn(t, newRig(t, newStorage(t)))
		})
	}
}

var ctx = context.Background()

const wait = 5 * time.Second

// rig is the write path over one store, with Widgets served.
type rig struct {
	t      *testing.T
	env    *Env
	s      cache.Interface
	reg    *registry.Store
	client *registry.Client
}

func newRig(t *testing.T, storage cache.Interface) *rig {
	env := New(t, Options{Storage: storage})
	client := env.Registry.Client("rules")
	crd, err := registry.DecodeObject([]byte(WidgetCRD))
	require.NoError(t, err)
	_, err = client.Create(ctx, cache.Key{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions", Name: "widgets.test.opemu.dev"}, crd)
	require.NoError(t, err)
	return &rig{t: t, env: env, s: storage, reg: env.Registry, client: client}
}

func (r *rig) create(ns, name string, replicas int) *cache.Object {
	r.t.Helper()
	o, err := r.client.Create(ctx, WidgetKey(ns, name), Widget(name, replicas))
	require.NoError(r.t, err)
	return o
}

// modify decodes the stored object, applies fn and updates it unconditionally.
func (r *rig) modify(key cache.Key, fn func(obj map[string]any)) (*cache.Object, error) {
	r.t.Helper()
	cur, err := r.s.Get(ctx, key)
	require.NoError(r.t, err)
	obj := cachetest.Decode(r.t, cur)
	delete(md(obj), "resourceVersion")
	fn(obj)
	return r.client.Update(ctx, key, obj)
}

func md(obj map[string]any) map[string]any { return obj["metadata"].(map[string]any) }

func nsKey(name string) cache.Key { return cache.Key{Resource: "namespaces", Name: name} }

func testCreateStamps(t *testing.T, r *rig) {
	obj := Widget("web", 1)
	md(obj)["uid"] = "client-uid"
	md(obj)["resourceVersion"] = "42"
	md(obj)["generation"] = json.Number("9")
	md(obj)["deletionTimestamp"] = "2020-01-01T00:00:00Z"
	md(obj)["creationTimestamp"] = "2020-01-01T00:00:00Z"
	o, err := r.client.Create(ctx, WidgetKey("default", "web"), obj)
	require.NoError(t, err)
	m := md(cachetest.Decode(t, o))
	assert.NotEqual(t, "client-uid", m["uid"])
	assert.Len(t, m["uid"], 36, "a UUID")
	assert.Equal(t, fmt.Sprint(o.ResourceVersion()), m["resourceVersion"])
	assert.Equal(t, json.Number("1"), m["generation"])
	assert.Nil(t, m["deletionTimestamp"])
	ts, err := time.Parse(time.RFC3339, m["creationTimestamp"].(string))
	require.NoError(t, err)
	assert.WithinDuration(t, time.Now(), ts, time.Minute)
	assert.Equal(t, "web", m["name"])
	assert.Equal(t, "default", m["namespace"])
	assert.False(t, o.Deleting())
	assert.Equal(t, int64(1), o.Generation())
}

func testGenerateName(t *testing.T, r *rig) {
	seen := map[string]bool{}
	for range 20 {
		obj := Widget("", 1)
		delete(md(obj), "name")
		md(obj)["generateName"] = "web-"
		o, err := r.client.Create(ctx, WidgetKey("default", ""), obj)
		require.NoError(t, err)
		name := o.Key().Name
		assert.Regexp(t, `^web-[bcdfghjklmnpqrstvwxz2456789]{5}$`, name)
		assert.Equal(t, name, cachetest.Meta(t, o, "name"))
		assert.False(t, seen[name])
		seen[name] = true
	}
	obj := Widget("", 1)
	delete(md(obj), "name")
	_, err := r.client.Create(ctx, WidgetKey("default", ""), obj)
	require.True(t, apierrors.IsInvalid(err), "name or generateName is required: %v", err)
}

func testUpdatePreconditions(t *testing.T, r *rig) {
	o := r.create("default", "web", 1)
	key := WidgetKey("default", "web")
	obj := Widget("web", 2)
	md(obj)["resourceVersion"] = fmt.Sprint(o.ResourceVersion() - 1)
	_, err := r.client.Update(ctx, key, obj)
	require.ErrorIs(t, err, cache.ErrConflict)

	md(obj)["resourceVersion"] = fmt.Sprint(o.ResourceVersion())
	u, err := r.client.Update(ctx, key, obj)
	require.NoError(t, err)
	assert.Greater(t, u.ResourceVersion(), o.ResourceVersion())
	assert.Equal(t, o.UID(), u.UID(), "uid is kept")
	assert.Equal(t, cachetest.Meta(t, o, "creationTimestamp"), cachetest.Meta(t, u, "creationTimestamp"))

	u2, err := r.client.Update(ctx, key, Widget("web", 3))
	require.NoError(t, err, "without a resourceVersion the update is unconditional")
	assert.Greater(t, u2.ResourceVersion(), u.ResourceVersion())

	_, err = r.client.Update(ctx, WidgetKey("default", "missing"), Widget("missing", 1))
	require.ErrorIs(t, err, cache.ErrNotFound)
	bad := Widget("web", 1)
	md(bad)["resourceVersion"] = "abc"
	_, err = r.client.Update(ctx, key, bad)
	require.True(t, apierrors.IsInvalid(err), "a resourceVersion that is not a number: %v", err)
}

func testGeneration(t *testing.T, r *rig) {
	key := WidgetKey("default", "web")
	r.create("default", "web", 1)
	steps := []struct {
		name string
		fn   func(map[string]any)
		want int64
	}{
		{"label", func(o map[string]any) { md(o)["labels"] = map[string]any{"a": "b"} }, 1},
		{"annotation", func(o map[string]any) { md(o)["annotations"] = map[string]any{"a": "b"} }, 1},
		{"status", func(o map[string]any) { o["status"] = map[string]any{"phase": "Running"} }, 1},
		{"spec", func(o map[string]any) { o["spec"].(map[string]any)["replicas"] = json.Number("5") }, 2},
		{"another top-level field", func(o map[string]any) { o["data"] = map[string]any{"x": "y"} }, 3},
		{"client generation ignored", func(o map[string]any) { md(o)["generation"] = json.Number("99") }, 3},
	}
	for _, st := range steps {
		o, err := r.modify(key, st.fn)
		require.NoError(t, err, st.name)
		assert.Equal(t, st.want, o.Generation(), st.name)
	}
}

func testNoOpUpdate(t *testing.T, r *rig) {
	o := r.create("default", "web", 1)
	w, err := r.s.Watch(ctx, cache.WatchOptions{})
	require.NoError(t, err)
	defer w.Stop()
	u, err := r.modify(WidgetKey("default", "web"), func(map[string]any) {})
	require.NoError(t, err)
	assert.Same(t, o, u, "the stored object is returned unchanged")
	assert.Equal(t, o.ResourceVersion(), r.s.ResourceVersion(), "no new version")
	cachetest.ExpectNone(t, w, 50*time.Millisecond)
}

func testFinalizers(t *testing.T, r *rig) {
	key := WidgetKey("default", "web")
	obj := Widget("web", 1)
	md(obj)["finalizers"] = []any{"example.com/a"}
	o, err := r.client.Create(ctx, key, obj)
	require.NoError(t, err)
	w, err := r.s.Watch(ctx, cache.WatchOptions{Resources: []cache.GroupResource{Widgets}})
	require.NoError(t, err)
	defer w.Stop()

	d, removed, err := r.client.Delete(ctx, key, cache.Preconditions{})
	require.NoError(t, err)
	assert.False(t, removed)
	assert.True(t, d.Deleting())
	assert.NotEmpty(t, cachetest.Meta(t, d, "deletionTimestamp"))
	assert.Equal(t, o.Generation()+1, d.Generation(), "marking for deletion bumps generation")
	assert.Equal(t, cache.Modified, cachetest.Collect(t, w, 1, wait)[0].Type)

	again, removed, err := r.client.Delete(ctx, key, cache.Preconditions{})
	require.NoError(t, err)
	assert.False(t, removed)
	assert.Same(t, d, again, "a second delete changes nothing")

	_, err = r.modify(key, func(o map[string]any) { md(o)["finalizers"] = []any{"example.com/a", "example.com/b"} })
	require.True(t, apierrors.IsInvalid(err), "no new finalizers while deleting: %v", err)

	_, err = r.modify(key, func(o map[string]any) { md(o)["deletionTimestamp"] = nil })
	require.NoError(t, err)
	got, err := r.s.Get(ctx, key)
	require.NoError(t, err)
	assert.True(t, got.Deleting(), "clients cannot clear deletionTimestamp")

	gone, err := r.modify(key, func(o map[string]any) { md(o)["finalizers"] = []any{} })
	require.NoError(t, err)
	ev := cachetest.Collect(t, w, 1, wait)[0]
	assert.Equal(t, cache.Deleted, ev.Type, "emptying finalizers removes it (clearing deletionTimestamp was no write)")
	assert.Equal(t, gone.ResourceVersion(), ev.ResourceVersion)
	_, err = r.s.Get(ctx, key)
	require.ErrorIs(t, err, cache.ErrNotFound)
}

// testDeletePropagation: Orphan and Foreground mark an object without finalizers with the
// garbage collector's finalizer; a later delete may change the policy (the finalizers) but
// not deletionTimestamp; Background takes them away, and the object goes when none is left;
// without a policy the object's own garbage-collection finalizer stays.
func testDeletePropagation(t *testing.T, r *rig) {
	key := WidgetKey("default", "web")
	r.create("default", "web", 1)
	widgets, err := r.reg.TargetOf(key)
	require.NoError(t, err)
	del := func(policy metav1.DeletionPropagation, dry bool) (*cache.Object, bool) {
		t.Helper()
		o, removed, err := r.reg.Delete(ctx, widgets, cache.Preconditions{}, registry.Options{PropagationPolicy: policy, DryRun: dry})
		require.NoError(t, err)
		return o, removed
	}
	o, removed := del(metav1.DeletePropagationOrphan, true)
	assert.False(t, removed)
	assert.Equal(t, []string{metav1.FinalizerOrphanDependents}, o.Finalizers(), "dry run")
	got, err := r.s.Get(ctx, key)
	require.NoError(t, err)
	assert.False(t, got.Deleting(), "a dry run stores nothing")

	o, removed = del(metav1.DeletePropagationOrphan, false)
	assert.False(t, removed)
	assert.True(t, o.Deleting())
	assert.Equal(t, []string{metav1.FinalizerOrphanDependents}, o.Finalizers())
	since := cachetest.Meta(t, o, "deletionTimestamp")
	gen := o.Generation()

	o, removed = del("", false)
	assert.False(t, removed)
	assert.Equal(t, []string{metav1.FinalizerOrphanDependents}, o.Finalizers(), "no policy keeps the object's own")

	o, removed = del(metav1.DeletePropagationForeground, false)
	assert.False(t, removed)
	assert.Equal(t, []string{metav1.FinalizerDeleteDependents}, o.Finalizers(), "a second delete switches the policy")
	assert.Equal(t, since, cachetest.Meta(t, o, "deletionTimestamp"), "and keeps deletionTimestamp")
	assert.Equal(t, gen, o.Generation())

	_, removed = del(metav1.DeletePropagationBackground, false)
	assert.True(t, removed, "Background removes the last finalizer: the object goes")
	_, err = r.s.Get(ctx, key)
	require.ErrorIs(t, err, cache.ErrNotFound)

	// Another finalizer stays whatever the policy.
	obj := Widget("held", 1)
	md(obj)["finalizers"] = []any{"example.com/hold"}
	_, err = r.client.Create(ctx, WidgetKey("default", "held"), obj)
	require.NoError(t, err)
	widgets.Key.Name = "held"
	o, removed = del(metav1.DeletePropagationForeground, false)
	assert.False(t, removed)
	assert.Equal(t, []string{"example.com/hold", metav1.FinalizerDeleteDependents}, o.Finalizers())
	o, removed = del(metav1.DeletePropagationBackground, false)
	assert.False(t, removed)
	assert.Equal(t, []string{"example.com/hold"}, o.Finalizers())
}

func testDryRun(t *testing.T, r *rig) {
	existing := r.create("default", "web", 1)
	w, err := r.s.Watch(ctx, cache.WatchOptions{})
	require.NoError(t, err)
	defer w.Stop()
	rv := r.s.ResourceVersion()
	dry := registry.Options{DryRun: true}
	widgets, err := r.reg.TargetOf(WidgetKey("default", ""))
	require.NoError(t, err)

	res, err := r.reg.Create(ctx, widgets, Widget("new", 1), dry)
	require.NoError(t, err)
	assert.Zero(t, res.Object.ResourceVersion(), "a dry-run create has no resourceVersion")
	_, err = r.reg.Create(ctx, widgets, Widget("web", 1), dry)
	require.ErrorIs(t, err, cache.ErrAlreadyExists)
	widgets.Key.Name = "web"
	res, err = r.reg.Update(ctx, widgets, Widget("web", 9), dry)
	require.NoError(t, err)
	assert.Equal(t, json.Number("9"), cachetest.Decode(t, res.Object)["spec"].(map[string]any)["replicas"])
	_, removed, err := r.reg.Delete(ctx, widgets, cache.Preconditions{}, dry)
	require.NoError(t, err)
	assert.True(t, removed)

	assert.Equal(t, rv, r.s.ResourceVersion(), "nothing was written")
	got, err := r.s.Get(ctx, WidgetKey("default", "web"))
	require.NoError(t, err)
	assert.Same(t, existing, got)
	cachetest.ExpectNone(t, w, 50*time.Millisecond)
}

// testMissingNamespace: the system namespaces exist from the start; a create into any other
// namespace is a 404 on the namespace until it is created (kube-apiserver's NamespaceLifecycle
// admission), dry run, generated name and invalid object alike, and writes nothing.
func testMissingNamespace(t *testing.T, r *rig) {
	for _, name := range registry.SystemNamespaces {
		ns, err := r.s.Get(ctx, nsKey(name))
		require.NoError(t, err, "%s exists at start", name)
		assert.Equal(t, "Active", cachetest.Decode(t, ns)["status"].(map[string]any)["phase"])
	}
	w, err := r.s.Watch(ctx, cache.WatchOptions{})
	require.NoError(t, err)
	defer w.Stop()
	widgets, err := r.reg.TargetOf(WidgetKey("team-a", ""))
	require.NoError(t, err)
	generated := Widget("", 1)
	delete(md(generated), "name")
	md(generated)["generateName"] = "web-"
	invalid := Widget("Not_A_Name", 1)
	for name, c := range map[string]struct {
		obj map[string]any
		o   registry.Options
	}{
		"create":    {Widget("web", 1), registry.Options{}},
		"dry run":   {Widget("web", 1), registry.Options{DryRun: true}},
		"generated": {generated, registry.Options{}},
		"invalid":   {invalid, registry.Options{}},
	} {
		_, err := r.reg.Create(ctx, widgets, c.obj, c.o)
		require.True(t, apierrors.IsNotFound(err), "%s: %v", name, err)
		st := err.(apierrors.APIStatus).Status()
		assert.Equal(t, `namespaces "team-a" not found`, st.Message, name)
		assert.Equal(t, &metav1.StatusDetails{Name: "team-a", Kind: "namespaces"}, st.Details, name)
	}
	_, err = r.s.Get(ctx, nsKey("team-a"))
	require.ErrorIs(t, err, cache.ErrNotFound, "no namespace created")
	cachetest.ExpectNone(t, w, 50*time.Millisecond)

	r.env.Namespaces(t, "team-a")
	r.create("team-a", "web", 1)
	evs := cachetest.Collect(t, w, 2, wait)
	assert.Equal(t, nsKey("team-a"), evs[0].Object.Key())
	assert.Equal(t, WidgetKey("team-a", "web"), evs[1].Object.Key())
}

func testNamespaceDeletion(t *testing.T, r *rig) {
	r.env.Namespaces(t, "team", "orphans")
	r.create("team", "plain", 1)

	ns, removed, err := r.client.Delete(ctx, nsKey("team"), cache.Preconditions{})
	require.NoError(t, err)
	assert.False(t, removed, "a DELETE marks the namespace")
	obj := cachetest.Decode(t, ns)
	assert.Equal(t, "Terminating", obj["status"].(map[string]any)["phase"])
	assert.Equal(t, []any{"kubernetes"}, obj["spec"].(map[string]any)["finalizers"])
	assert.NotEmpty(t, md(obj)["deletionTimestamp"])
	_, err = r.s.Get(ctx, WidgetKey("team", "plain"))
	require.NoError(t, err, "what is in it is the namespace controller's to delete")
	_, err = r.modify(WidgetKey("team", "plain"), func(o map[string]any) { md(o)["labels"] = map[string]any{"changed": "yes"} })
	require.NoError(t, err, "objects in a Terminating namespace may still change")

	_, err = r.client.Create(ctx, WidgetKey("team", "new"), Widget("new", 1))
	require.True(t, apierrors.IsForbidden(err), "no new content in a Terminating namespace: %v", err)
	st := err.(apierrors.APIStatus).Status()
	require.Len(t, st.Details.Causes, 1)
	assert.Equal(t, metav1.CauseType("NamespaceTerminating"), st.Details.Causes[0].Type)
	_, err = r.client.Create(ctx, WidgetKey("team", "Not_A_Name"), Widget("Not_A_Name", 1))
	require.True(t, apierrors.IsForbidden(err), "refused before it is validated: %v", err)

	again, removed, err := r.client.Delete(ctx, nsKey("team"), cache.Preconditions{})
	require.NoError(t, err)
	assert.False(t, removed, "spec.finalizers hold it")
	assert.Equal(t, ns.ResourceVersion(), again.ResourceVersion(), "a second DELETE changes nothing")

	// The namespace controller's last step: /finalize empties spec.finalizers, which removes it.
	_, _, err = r.client.Delete(ctx, WidgetKey("team", "plain"), cache.Preconditions{})
	require.NoError(t, err)
	obj = cachetest.Decode(t, again)
	obj["spec"] = map[string]any{"finalizers": []any{}}
	_, err = r.client.Finalize(ctx, nsKey("team"), obj)
	require.NoError(t, err)
	_, err = r.s.Get(ctx, nsKey("team"))
	require.ErrorIs(t, err, cache.ErrNotFound, "the namespace goes with its last finalizer")

	// A finalizer in metadata (the propagation policy's) holds it past /finalize.
	r.create("orphans", "x", 1)
	marked, removed, err := r.client.DeletePropagating(ctx, nsKey("orphans"), cache.Preconditions{}, metav1.DeletePropagationOrphan)
	require.NoError(t, err)
	assert.False(t, removed)
	assert.Equal(t, []string{metav1.FinalizerOrphanDependents}, marked.Finalizers())
	obj = cachetest.Decode(t, marked)
	obj["spec"] = map[string]any{}
	finalized, err := r.client.Finalize(ctx, nsKey("orphans"), obj)
	require.NoError(t, err)
	assert.True(t, finalized.Deleting(), "the orphan finalizer holds it")
	_, err = r.modify(nsKey("orphans"), func(o map[string]any) { delete(md(o), "finalizers") })
	require.NoError(t, err)
	_, err = r.s.Get(ctx, nsKey("orphans"))
	require.ErrorIs(t, err, cache.ErrNotFound)

	for _, name := range []string{"default", "kube-system", "kube-public"} {
		_, _, err = r.client.Delete(ctx, nsKey(name), cache.Preconditions{})
		require.True(t, apierrors.IsForbidden(err), "%s cannot be deleted: %v", name, err)
	}
}
