package main

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	cachev1alpha1 "github.com/opemu/opemu/examples/memcached-operator/api/v1alpha1"
	"github.com/opemu/opemu/examples/memcached-operator/internal/controller"
)

// The operator's tests. Each runs in a namespace of its own, in parallel with the others, the
// same against testenv and against an existing cluster (suite_test.go).

// wait bounds every wait for the operator: generous for a loaded CI machine; a pass takes
// milliseconds.
const wait = 20 * time.Second

// TestCreatesDeploymentSizedFromSpec: a Memcached gets a finalizer, a Deployment of spec.size
// replicas that it controls (on the port the defaulting webhook chose), the Available
// condition once the Deployment has that size, and an Event; a new size resizes the Deployment.
func TestCreatesDeploymentSizedFromSpec(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := newNamespace(t)
	m := &cachev1alpha1.Memcached{
		ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: ns},
		Spec:       cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](2)},
	}
	require.NoError(t, k8sClient.Create(ctx, m))

	dep := waitForDeployment(t, m, 2)
	require.Len(t, dep.OwnerReferences, 1)
	owner := dep.OwnerReferences[0]
	assert.Equal(t, "Memcached", owner.Kind)
	assert.Equal(t, m.UID, owner.UID)
	assert.Equal(t, ptr.To(true), owner.Controller)
	assert.Equal(t, ptr.To(true), owner.BlockOwnerDeletion)
	c := dep.Spec.Template.Spec.Containers[0]
	assert.Equal(t, controller.Image, c.Image)
	assert.Equal(t, cachev1alpha1.DefaultContainerPort, c.Ports[0].ContainerPort)

	got := waitForCondition(t, m, controller.TypeAvailable, metav1.ConditionTrue)
	assert.True(t, controllerutil.ContainsFinalizer(got, controller.Finalizer))
	assert.True(t, meta.IsStatusConditionFalse(got.Status.Conditions, controller.TypeProgressing))
	waitForEvent(t, m, "Created")

	update(t, m, func(m *cachev1alpha1.Memcached) { m.Spec.Size = ptr.To[int32](3) })
	waitForDeployment(t, m, 3)
	waitForEvent(t, m, "Scaled")
	got = waitForCondition(t, m, controller.TypeAvailable, metav1.ConditionTrue)
	cond := meta.FindStatusCondition(got.Status.Conditions, controller.TypeAvailable)
	assert.Equal(t, got.Generation, cond.ObservedGeneration, "the condition is about the new size")
}

// TestDefaultingWebhook: what a Memcached leaves out is set by the operator's mutating
// webhook (the CRD's schema defaults nothing), in the object the create returns.
func TestDefaultingWebhook(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	m := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "defaults", Namespace: ns}}
	require.NoError(t, k8sClient.Create(t.Context(), m))
	assert.Equal(t, ptr.To(cachev1alpha1.DefaultSize), m.Spec.Size)
	assert.Equal(t, cachev1alpha1.DefaultContainerPort, m.Spec.ContainerPort)

	// An update that drops them gets them back.
	update(t, m, func(m *cachev1alpha1.Memcached) { m.Spec = cachev1alpha1.MemcachedSpec{} })
	assert.Equal(t, ptr.To(cachev1alpha1.DefaultSize), m.Spec.Size)
	assert.Equal(t, cachev1alpha1.DefaultContainerPort, m.Spec.ContainerPort)
}

// TestValidatingWebhook: the operator's validating webhook refuses a privileged port and a
// change of the port with the 422 it returns, cause and all; the CRD's schema refuses a size
// past its maximum before any webhook; a valid object of the largest size is created with the
// webhook's warning passed on to the client.
func TestValidatingWebhook(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := newNamespace(t)
	for _, tc := range []struct {
		name  string
		spec  cachev1alpha1.MemcachedSpec
		field string
		msg   string
	}{
		{name: "privileged port", spec: cachev1alpha1.MemcachedSpec{ContainerPort: 80}, field: "spec.containerPort", msg: "memcached runs as a non-root user"},
		{name: "port out of range", spec: cachev1alpha1.MemcachedSpec{ContainerPort: 70000}, field: "spec.containerPort", msg: "must be between 1024 and 65535"},
		{name: "size over the schema's maximum", spec: cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](5)}, field: "spec.size"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{GenerateName: "bad-", Namespace: ns}, Spec: tc.spec}
			err := k8sClient.Create(ctx, m)
			require.True(t, apierrors.IsInvalid(err), "want 422 Invalid, got %v", err)
			assert.Equal(t, []string{tc.field}, causeFields(err))
			assert.ErrorContains(t, err, tc.msg)
		})
	}

	warned := &warnings{}
	wcfg := rest.CopyConfig(cfg)
	wcfg.WarningHandler = warned
	wc, err := client.New(wcfg, client.Options{Scheme: k8sClient.Scheme()})
	require.NoError(t, err)
	m := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "largest", Namespace: ns}, Spec: cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](3)}}
	require.NoError(t, wc.Create(ctx, m))
	assert.Contains(t, warned.all(), "spec.size is 3, the most this operator runs: the cache cannot grow further")

	// The operator writes the object too (its finalizer, its status): change the port on the
	// latest version, so the answer is the webhook's and not a 409.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
			return err
		}
		m.Spec.ContainerPort = 12000
		return k8sClient.Update(ctx, m)
	})
	require.True(t, apierrors.IsInvalid(err), "want 422 Invalid, got %v", err)
	assert.Equal(t, []string{"spec.containerPort"}, causeFields(err))
	assert.ErrorContains(t, err, "is immutable once set (it is 11211)")
}

// TestDeleteCollectsDeployment: deleting a Memcached runs the operator's finalizer (a Warning
// Event, the Degraded condition), and once it is gone its Deployment is collected through
// its ownerReference, as a cluster's garbage collector does (envtest runs none).
func TestDeleteCollectsDeployment(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := newNamespace(t)
	m := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "doomed", Namespace: ns}, Spec: cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](1)}}
	require.NoError(t, k8sClient.Create(ctx, m))
	waitForDeployment(t, m, 1)
	got := waitForCondition(t, m, controller.TypeAvailable, metav1.ConditionTrue)
	require.True(t, controllerutil.ContainsFinalizer(got, controller.Finalizer))

	require.NoError(t, k8sClient.Delete(ctx, m))
	require.Eventually(t, func() bool {
		return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(m), &cachev1alpha1.Memcached{}))
	}, wait, 10*time.Millisecond, "the finalizer was not removed")
	ev := waitForEvent(t, m, "Deleting")
	assert.Equal(t, corev1.EventTypeWarning, ev.Type)
	assert.Equal(t, "Custom resource doomed is being deleted from the namespace "+ns, ev.Note)

	require.Eventually(t, func() bool {
		err := k8sClient.Get(ctx, client.ObjectKeyFromObject(m), &appsv1.Deployment{})
		return apierrors.IsNotFound(err)
	}, wait, 10*time.Millisecond, "the Deployment of a deleted Memcached was not collected")
}

// TestNamespaceDeletionFinishes: deleting a namespace with a Memcached in it finishes: the
// Memcached's finalizer is run by the operator and the namespace is removed (in envtest a
// namespace stays Terminating forever). The removal is watched for; the operator's Event about
// the finalized Memcached may come after it, and is refused (404) as on a cluster.
func TestNamespaceDeletionFinishes(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := newNamespace(t)
	m := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "inside", Namespace: ns}}
	require.NoError(t, k8sClient.Create(ctx, m))
	waitForCondition(t, m, controller.TypeAvailable, metav1.ConditionTrue)

	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	w, err := cs.CoreV1().Namespaces().Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + ns})
	require.NoError(t, err)
	defer w.Stop()
	require.NoError(t, k8sClient.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	timeout := time.After(wait)
	for removed := false; !removed; {
		select {
		case ev, ok := <-w.ResultChan():
			require.True(t, ok, "the watch ended before the namespace was removed")
			removed = ev.Type == watch.Deleted
		case <-timeout:
			t.Fatalf("the namespace %s was not removed within %v", ns, wait)
		}
	}
	err = k8sClient.Get(ctx, client.ObjectKeyFromObject(m), &cachev1alpha1.Memcached{})
	assert.True(t, apierrors.IsNotFound(err), "the Memcached went with its namespace: %v", err)
}

// newNamespace makes a namespace for one test, deleted when it ends.
func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "memcached-test-"}}
	require.NoError(t, k8sClient.Create(t.Context(), ns))
	t.Cleanup(func() {
		_ = k8sClient.Delete(context.Background(), ns)
	})
	return ns.Name
}

// waitForDeployment waits for m's Deployment to have replicas and returns it.
func waitForDeployment(t *testing.T, m *cachev1alpha1.Memcached, replicas int32) *appsv1.Deployment {
	t.Helper()
	dep := &appsv1.Deployment{}
	require.Eventually(t, func() bool {
		err := k8sClient.Get(t.Context(), client.ObjectKeyFromObject(m), dep)
		return err == nil && dep.Spec.Replicas != nil && *dep.Spec.Replicas == replicas
	}, wait, 10*time.Millisecond, "no Deployment of %d replicas for %s (last seen: %v)", replicas, m.Name, dep.Spec.Replicas)
	return dep
}

// waitForCondition waits for m's condition typ to have status, and returns m as then read.
func waitForCondition(t *testing.T, m *cachev1alpha1.Memcached, typ string, status metav1.ConditionStatus) *cachev1alpha1.Memcached {
	t.Helper()
	got := &cachev1alpha1.Memcached{}
	require.Eventually(t, func() bool {
		if err := k8sClient.Get(t.Context(), client.ObjectKeyFromObject(m), got); err != nil {
			return false
		}
		c := meta.FindStatusCondition(got.Status.Conditions, typ)
		return c != nil && c.Status == status && c.ObservedGeneration == got.Generation
	}, wait, 10*time.Millisecond, "%s: no condition %s=%s (conditions: %+v)", m.Name, typ, status, got.Status.Conditions)
	return got
}

// waitForEvent waits for an Event of reason about m (events.k8s.io/v1, as the manager's
// recorder writes them) and returns it.
func waitForEvent(t *testing.T, m *cachev1alpha1.Memcached, reason string) eventsv1.Event {
	t.Helper()
	var found eventsv1.Event
	require.Eventually(t, func() bool {
		var list eventsv1.EventList
		if err := k8sClient.List(t.Context(), &list, client.InNamespace(m.Namespace)); err != nil {
			return false
		}
		for _, e := range list.Items {
			if e.Reason == reason && e.Regarding.Kind == "Memcached" && e.Regarding.Name == m.Name {
				found = e
				return true
			}
		}
		return false
	}, wait, 20*time.Millisecond, "no Event %s for %s", reason, m.Name)
	return found
}

// update applies change to the newest m and writes it, again on a conflict (the operator
// writes m too); m is left as written.
func update(t *testing.T, m *cachev1alpha1.Memcached, change func(*cachev1alpha1.Memcached)) {
	t.Helper()
	require.Eventually(t, func() bool {
		if err := k8sClient.Get(t.Context(), client.ObjectKeyFromObject(m), m); err != nil {
			return false
		}
		change(m)
		err := k8sClient.Update(t.Context(), m)
		require.False(t, err != nil && !apierrors.IsConflict(err), "update: %v", err)
		return err == nil
	}, wait, 10*time.Millisecond)
}

// causeFields are the fields a 422's causes name.
func causeFields(err error) []string {
	var fields []string
	if st, ok := err.(apierrors.APIStatus); ok && st.Status().Details != nil {
		for _, c := range st.Status().Details.Causes {
			fields = append(fields, c.Field)
		}
	}
	return fields
}

// warnings collects the Warning headers a client received.
type warnings struct {
	mu   sync.Mutex
	seen []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, text)
}

func (w *warnings) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.seen...)
}
