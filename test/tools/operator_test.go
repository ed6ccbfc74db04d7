package tools

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/e2e-framework/klient/k8s"
	"sigs.k8s.io/e2e-framework/klient/k8s/resources"
	"sigs.k8s.io/e2e-framework/klient/wait"
	"sigs.k8s.io/e2e-framework/klient/wait/conditions"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	cachev1alpha1 "github.com/opemu/opemu/examples/memcached-operator/api/v1alpha1"
)

// The operator suite's namespace.
const suiteNamespace = "memcached-e2e"

// waitFor bounds the suite's waits: each is a few reconciles on opemu, given a loaded 2-core
// machine's margin.
func waitFor(ctx context.Context, cond func(context.Context) (bool, error)) error {
	return wait.For(cond, wait.WithTimeout(30*time.Second), wait.WithInterval(20*time.Millisecond), wait.WithContext(ctx))
}

// TestMemcachedOperator is the memcached operator's end-to-end suite, as an operator author
// writes it with e2e-framework for a kind cluster: a Memcached gets its Deployment, its Pods and
// its status; resized, the Deployment and the Pods follow; one out of the schema's bounds is
// rejected; deleted, the finalizer runs and the Deployment and Pods are collected. It logs the
// suite's wall time from the start of its environment (opemu, the CRD, the operator).
func TestMemcachedOperator(t *testing.T) {
	sample := &cachev1alpha1.Memcached{
		ObjectMeta: metav1.ObjectMeta{Name: "memcached-sample", Namespace: suiteNamespace},
		Spec:       cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](2)},
	}
	f := features.New("memcached operator").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			require.NoError(t, cachev1alpha1.AddToScheme(cfg.Client().Resources().GetScheme()))
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: suiteNamespace}}
			require.NoError(t, cfg.Client().Resources().Create(ctx, ns))
			return ctx
		}).
		Assess("a Memcached gets its Deployment, Pods and status", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			r := cfg.Client().Resources(suiteNamespace)
			require.NoError(t, r.Create(ctx, sample))
			assertSize(ctx, t, r, sample, 2)
			return ctx
		}).
		Assess("resized, its Deployment and Pods follow", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			r := cfg.Client().Resources(suiteNamespace)
			m := &cachev1alpha1.Memcached{}
			require.NoError(t, r.Get(ctx, sample.Name, suiteNamespace, m))
			m.Spec.Size = ptr.To[int32](3)
			require.NoError(t, r.Update(ctx, m))
			assertSize(ctx, t, r, sample, 3)
			return ctx
		}).
		Assess("one above the schema's maximum size is rejected", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			r := cfg.Client().Resources(suiteNamespace)
			big := &cachev1alpha1.Memcached{
				ObjectMeta: metav1.ObjectMeta{Name: "too-big", Namespace: suiteNamespace},
				Spec:       cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](5)},
			}
			err := r.Create(ctx, big)
			require.Error(t, err)
			assert.True(t, apierrors.IsInvalid(err), "a 422 Invalid, got %v", err)
			assert.Contains(t, err.Error(), "spec.size: Invalid value: 5: spec.size in body should be less than or equal to 3")
			assert.True(t, apierrors.IsNotFound(r.Get(ctx, big.Name, suiteNamespace, &cachev1alpha1.Memcached{})), "nothing was stored")
			return ctx
		}).
		Assess("deleted, it is finalized and its Deployment and Pods are collected", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			r := cfg.Client().Resources(suiteNamespace)
			require.NoError(t, r.Delete(ctx, sample))
			c := conditions.New(r)
			require.NoError(t, waitFor(ctx, c.ResourceDeleted(sample)), "the Memcached is finalized and goes")
			dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: sample.Name, Namespace: suiteNamespace}}
			require.NoError(t, waitFor(ctx, c.ResourceDeleted(dep)), "the garbage collector deletes its Deployment")
			require.NoError(t, waitFor(ctx, podsRunning(r, sample, 0, func(*corev1.Pod) bool { return true })), "and its ReplicaSet's Pods")
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: suiteNamespace}}
			require.NoError(t, cfg.Client().Resources().Delete(ctx, ns))
			require.NoError(t, waitFor(ctx, conditions.New(cfg.Client().Resources()).ResourceDeleted(ns)), "the namespace's deletion finishes")
			return ctx
		}).Feature()
	testenv.Test(t, f)
	t.Logf("the memcached operator's e2e-framework suite: %v from the start of its environment (opemu, the CRD, the operator)", time.Since(suiteStarted).Round(time.Millisecond))
}

// podsOf selects the Pods of m's Deployment.
func podsOf(m *cachev1alpha1.Memcached) resources.ListOption {
	return resources.WithLabelSelector("app.kubernetes.io/instance=" + m.Name + ",app.kubernetes.io/managed-by=memcached-operator")
}

// assertSize waits until m's Deployment has size replicas, all available, as many running and
// ready Pods, and m's status says Available.
func assertSize(ctx context.Context, t *testing.T, r *resources.Resources, m *cachev1alpha1.Memcached, size int32) {
	t.Helper()
	c := conditions.New(r)
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace}}
	require.NoError(t, waitFor(ctx, c.ResourceMatch(dep, func(o k8s.Object) bool {
		d := o.(*appsv1.Deployment)
		return ptr.Deref(d.Spec.Replicas, 0) == size && d.Status.AvailableReplicas == size && d.Status.UpdatedReplicas == size && d.Status.Replicas == size
	})), "the Deployment has %d available replicas", size)
	require.Len(t, dep.OwnerReferences, 1)
	assert.Equal(t, "Memcached", dep.OwnerReferences[0].Kind)
	assert.True(t, ptr.Deref(dep.OwnerReferences[0].Controller, false))
	require.NoError(t, waitFor(ctx, podsRunning(r, m, int(size), func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodRunning && p.Spec.NodeName != "" && p.Spec.Containers[0].Image == "memcached:1.6.38-alpine"
	})), "%d memcached Pods run on Nodes", size)
	got := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace}}
	want := fmt.Sprintf("Deployment %s has %d replicas", m.Name, size)
	require.NoError(t, waitFor(ctx, c.ResourceMatch(got, func(o k8s.Object) bool {
		cond := meta.FindStatusCondition(o.(*cachev1alpha1.Memcached).Status.Conditions, "Available")
		return cond != nil && cond.Status == metav1.ConditionTrue && cond.Message == want
	})), "the Memcached is Available: %s", want)
	assert.Equal(t, "Reconciled", meta.FindStatusCondition(got.Status.Conditions, "Available").Reason)
	assert.True(t, meta.IsStatusConditionFalse(got.Status.Conditions, "Progressing"))
}

// podsRunning is true when exactly n of m's Deployment's Pods exist (not being deleted) and all
// match ok.
func podsRunning(r *resources.Resources, m *cachev1alpha1.Memcached, n int, ok func(*corev1.Pod) bool) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := r.List(ctx, &pods, podsOf(m)); err != nil {
			return false, err
		}
		live := 0
		for i := range pods.Items {
			if p := &pods.Items[i]; p.DeletionTimestamp == nil {
				if !ok(p) {
					return false, nil
				}
				live++
			}
		}
		return live == n, nil
	}
}
