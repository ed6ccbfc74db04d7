package testenv_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/opemu/opemu/app"
	"github.com/opemu/opemu/testenv"
)

var things = schema.GroupVersionResource{Group: "example.org", Version: "v1", Resource: "things"}

// fixture starts an environment holding n objects of a suite: a Namespace, a Thing owning
// n-2 ConfigMaps (their ownerReferences name its uid) in two namespaces, one of them being
// deleted behind a finalizer.
func fixture(t testing.TB, n int, opts testenv.Options) *testenv.Environment {
	t.Helper()
	opts.CRDs = append(opts.CRDs, thingsCRD())
	env := testenv.New(t, opts)
	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(env.Config)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	owner, err := dyn.Resource(things).Namespace("default").Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.org/v1", "kind": "Thing", "metadata": map[string]any{"name": "owner"}, "spec": map[string]any{"size": int64(3)},
	}}, metav1.CreateOptions{})
	require.NoError(t, err)
	ref := metav1.OwnerReference{APIVersion: "example.org/v1", Kind: "Thing", Name: "owner", UID: owner.GetUID()}
	for i := range n - 2 {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("cm-", i)}, Data: map[string]string{"i": fmt.Sprint(i)}}
		ns := "team-a"
		if i%2 == 0 {
			ns = "default" // an owner and its dependents share a namespace
			cm.OwnerReferences = []metav1.OwnerReference{ref}
		}
		if i == 0 {
			cm.Finalizers = []string{"example.org/hold"}
		}
		_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	require.NoError(t, cs.CoreV1().ConfigMaps("default").Delete(ctx, "cm-0", metav1.DeleteOptions{}))
	return env
}

// state is what a client lists of an environment: every ConfigMap and Thing by
// namespace/name, with its uid, ownerReferences' uids, finalizers and whether it is being
// deleted.
func state(t *testing.T, env *testenv.Environment) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	add := func(kind string, m metav1.Object) {
		var owners []string
		for _, r := range m.GetOwnerReferences() {
			owners = append(owners, string(r.UID))
		}
		out[kind+" "+m.GetNamespace()+"/"+m.GetName()] = fmt.Sprint(m.GetUID(), owners, m.GetFinalizers(), m.GetDeletionTimestamp() != nil)
	}
	cms, err := kubernetes.NewForConfigOrDie(env.Config).CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for i := range cms.Items {
		add("ConfigMap", &cms.Items[i])
	}
	ts, err := dynamic.NewForConfigOrDie(env.Config).Resource(things).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for i := range ts.Items {
		add("Thing", &ts.Items[i])
	}
	return out
}

// TestSnapshotRestore: a restore brings back every object as it was (uids, ownerReferences,
// finalizers, an object being deleted) and removes what came after; resourceVersions keep
// moving forward; a watch from before the restore is expired (410) and one open across it
// ends with a 410 ERROR.
func TestSnapshotRestore(t *testing.T) {
	t.Parallel()
	env := fixture(t, 20, testenv.Options{})
	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(env.Config)
	saved := state(t, env)
	s, err := env.Snapshot()
	require.NoError(t, err)

	// Everything changes: ConfigMaps deleted (the finalizer lifted), one added, the owner replaced.
	_, err = cs.CoreV1().ConfigMaps("default").Patch(ctx, "cm-0", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	require.NoError(t, cs.CoreV1().ConfigMaps("team-a").DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}))
	_, err = cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	require.NoError(t, dyn.Resource(things).Namespace("default").Delete(ctx, "owner", metav1.DeleteOptions{}))
	_, err = dyn.Resource(things).Namespace("default").Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.org/v1", "kind": "Thing", "metadata": map[string]any{"name": "owner"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NotEqual(t, saved, state(t, env))

	before, err := cs.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	w, err := cs.CoreV1().ConfigMaps("").Watch(ctx, metav1.ListOptions{ResourceVersion: before.ResourceVersion})
	require.NoError(t, err)
	defer w.Stop()

	require.NoError(t, env.Restore(s))
	assert.Equal(t, saved, state(t, env), "every object as it was, nothing from after")

	ev := <-w.ResultChan()
	require.Equal(t, "ERROR", string(ev.Type), "an open watch ends with an ERROR")
	st, ok := ev.Object.(*metav1.Status)
	require.True(t, ok)
	assert.Equal(t, int32(410), st.Code)
	w2, err := cs.CoreV1().ConfigMaps("").Watch(ctx, metav1.ListOptions{ResourceVersion: before.ResourceVersion})
	require.NoError(t, err)
	defer w2.Stop()
	ev = <-w2.ResultChan()
	require.Equal(t, "ERROR", string(ev.Type), "a watch from before the restore does not resume")
	assert.Equal(t, int32(410), ev.Object.(*metav1.Status).Code)
	after, err := cs.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	assert.Greater(t, rv(t, after.ResourceVersion), rv(t, before.ResourceVersion), "resourceVersions keep moving forward")
	for _, cm := range after.Items {
		assert.Greater(t, rv(t, cm.ResourceVersion), rv(t, before.ResourceVersion), "%s has a version of the restore", cm.Name)
	}

	// The restored state is the API's like any other: the finalizer lifted, the object goes.
	_, err = cs.CoreV1().ConfigMaps("default").Patch(ctx, "cm-0", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	_, err = cs.CoreV1().ConfigMaps("default").Get(ctx, "cm-0", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err))
}

func rv(t *testing.T, s string) uint64 {
	t.Helper()
	var n uint64
	_, err := fmt.Sscan(s, &n)
	require.NoError(t, err)
	return n
}

// TestFork: a fork of an environment holding 1,000 objects, made 100 times, holds them all as
// they are (uids included), and each fork is on its own: what a test writes into its fork
// reaches neither the environment forked nor the other forks.
func TestFork(t *testing.T) {
	t.Parallel()
	const objects, forks = 1000, 100
	env := fixture(t, objects, testenv.Options{})
	want := state(t, env)
	require.Len(t, want, objects-1) // the Namespace is not listed here
	var took []time.Duration
	for i := range forks {
		start := time.Now()
		fork, err := testenv.Fork(env)
		require.NoError(t, err)
		took = append(took, time.Since(start))
		if i%25 == 0 {
			assert.Equal(t, want, state(t, fork), "fork %d holds the environment's objects as they are", i)
		}
		_, err = kubernetes.NewForConfigOrDie(fork.Config).CoreV1().ConfigMaps("default").Create(context.Background(),
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("fork-", i)}}, metav1.CreateOptions{})
		require.NoError(t, err)
		require.NoError(t, fork.Stop())
	}
	assert.Equal(t, want, state(t, env), "nothing a fork did reached the environment forked")
	slices.Sort(took)
	t.Logf("%d forks of %d objects: median %v, p90 %v", forks, objects, took[forks/2], took[forks*9/10])
}

// TestForkManualClock: a fork of an environment on a manual clock has a manual clock of its
// own, at the environment's time, moving on its own.
func TestForkManualClock(t *testing.T) {
	t.Parallel()
	clk := app.NewManualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	env := testenv.New(t, testenv.Options{Server: app.Config{Clock: clk}})
	clk.Step(time.Hour)
	fork := testenv.NewFork(t, env)
	ctx := context.Background()
	cm, err := kubernetes.NewForConfigOrDie(fork.Config).CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, "2030-01-01T01:00:00Z", cm.CreationTimestamp.UTC().Format(time.RFC3339), "the fork's clock is at the environment's time")
	clk.Step(time.Hour)
	cm, err = kubernetes.NewForConfigOrDie(fork.Config).CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "y"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, "2030-01-01T01:00:00Z", cm.CreationTimestamp.UTC().Format(time.RFC3339), "and its own")
}
