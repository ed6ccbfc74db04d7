package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	batchv1 "github.com/opemu/opemu/examples/cronjob-multiversion/api/v1"
	batchv2 "github.com/opemu/opemu/examples/cronjob-multiversion/api/v2"
)

// Every object is stored as v1; reading or writing v2 goes through the suite's conversion
// webhook (the server calls it: the client asks for the version it wants).

// newNamespace makes a namespace for one test, removed when it ends.
func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "cronjob-"}}
	require.NoError(t, k8sClient.Create(t.Context(), ns))
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), ns) })
	return ns.Name
}

func field(s string) *batchv2.CronField {
	f := batchv2.CronField(s)
	return &f
}

func TestWrittenAsV1ReadAsV2AndBack(t *testing.T) {
	ns := newNamespace(t)
	ctx := t.Context()
	suspend := true
	in := &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: ns},
		Spec:       batchv1.CronJobSpec{Schedule: "30 2 * * 1-5", ConcurrencyPolicy: "Forbid", Suspend: &suspend},
	}
	require.NoError(t, k8sClient.Create(ctx, in))

	var v2 batchv2.CronJob
	require.NoError(t, k8sClient.Get(ctx, client.ObjectKeyFromObject(in), &v2))
	assert.Equal(t, batchv2.CronSchedule{Minute: field("30"), Hour: field("2"), DayOfMonth: field("*"), Month: field("*"), DayOfWeek: field("1-5")}, v2.Spec.Schedule)
	assert.Equal(t, "Forbid", v2.Spec.ConcurrencyPolicy)
	assert.Equal(t, in.UID, v2.UID, "the same object")
	assert.Equal(t, in.ResourceVersion, v2.ResourceVersion)

	// An update through v2 is stored as v1.
	v2.Spec.Schedule.Hour = field("4")
	require.NoError(t, k8sClient.Update(ctx, &v2))
	var back batchv1.CronJob
	require.NoError(t, k8sClient.Get(ctx, client.ObjectKeyFromObject(in), &back))
	assert.Equal(t, "30 4 * * 1-5", back.Spec.Schedule)
	assert.Equal(t, v2.ResourceVersion, back.ResourceVersion)
}

func TestWrittenAsV2ReadAsV1(t *testing.T) {
	ns := newNamespace(t)
	ctx := t.Context()
	in := &batchv2.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: "hourly", Namespace: ns},
		Spec:       batchv2.CronJobSpec{Schedule: batchv2.CronSchedule{Minute: field("0")}},
	}
	require.NoError(t, k8sClient.Create(ctx, in))
	assert.Equal(t, batchv2.CronSchedule{Minute: field("0"), Hour: field("*"), DayOfMonth: field("*"), Month: field("*"), DayOfWeek: field("*")}, in.Spec.Schedule,
		"the answer to the create is the stored object converted back")

	var v1 batchv1.CronJob
	require.NoError(t, k8sClient.Get(ctx, client.ObjectKeyFromObject(in), &v1))
	assert.Equal(t, "0 * * * *", v1.Spec.Schedule)

	// Status written through v2's status subresource.
	in.Status.LastScheduleTime = &metav1.Time{Time: metav1.Now().Rfc3339Copy().Time}
	require.NoError(t, k8sClient.Status().Update(ctx, in))
	require.NoError(t, k8sClient.Get(ctx, client.ObjectKeyFromObject(in), &v1))
	require.NotNil(t, v1.Status.LastScheduleTime)
	assert.True(t, in.Status.LastScheduleTime.Equal(v1.Status.LastScheduleTime))
}

func TestListAndWatchV2(t *testing.T) {
	ns := newNamespace(t)
	ctx := t.Context()
	for _, name := range []string{"a", "b"} {
		require.NoError(t, k8sClient.Create(ctx, &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: batchv1.CronJobSpec{Schedule: "*/5 * * * *"}}))
	}
	var list batchv2.CronJobList
	require.NoError(t, k8sClient.List(ctx, &list, client.InNamespace(ns)))
	require.Len(t, list.Items, 2)
	for _, cj := range list.Items {
		assert.Equal(t, field("*/5"), cj.Spec.Schedule.Minute, cj.Name)
	}

	// A watch of v2 sends v2 objects.
	w, err := k8sClient.Watch(ctx, &batchv2.CronJobList{}, client.InNamespace(ns))
	require.NoError(t, err)
	defer w.Stop()
	ev := <-w.ResultChan()
	cj, ok := ev.Object.(*batchv2.CronJob)
	require.True(t, ok, "got %T", ev.Object)
	assert.Equal(t, field("*/5"), cj.Spec.Schedule.Minute)
}

func TestUnconvertibleSchedule(t *testing.T) {
	ns := newNamespace(t)
	ctx := t.Context()
	in := &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: "odd", Namespace: ns}, Spec: batchv1.CronJobSpec{Schedule: "@daily"}}
	require.NoError(t, k8sClient.Create(ctx, in))
	err := k8sClient.Get(ctx, client.ObjectKeyFromObject(in), &batchv2.CronJob{})
	require.Error(t, err, "the webhook cannot split @daily into five fields")
	assert.Contains(t, err.Error(), "conversion webhook for batch.tutorial.kubebuilder.io/v1, Kind=CronJob failed")
	require.NoError(t, k8sClient.Get(ctx, client.ObjectKeyFromObject(in), &batchv1.CronJob{}), "v1 needs no conversion")
}

func TestStoredVersions(t *testing.T) {
	var crd apiextensionsv1.CustomResourceDefinition
	require.NoError(t, k8sClient.Get(t.Context(), client.ObjectKey{Name: "cronjobs.batch.tutorial.kubebuilder.io"}, &crd))
	assert.Equal(t, []string{"v1"}, crd.Status.StoredVersions)
	require.NotNil(t, crd.Spec.Conversion)
	assert.Equal(t, apiextensionsv1.WebhookConverter, crd.Spec.Conversion.Strategy)

	// What the server has stored, read without a scheme: v1, whatever was written.
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: "batch.tutorial.kubebuilder.io", Version: "v1", Kind: "CronJob"})
	ns := newNamespace(t)
	require.NoError(t, k8sClient.Create(t.Context(), &batchv2.CronJob{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: ns}, Spec: batchv2.CronJobSpec{Schedule: batchv2.CronSchedule{Hour: field("3")}}}))
	require.NoError(t, k8sClient.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "x"}, u))
	sched, _, _ := unstructured.NestedString(u.Object, "spec", "schedule")
	assert.Equal(t, "* 3 * * *", sched)
}
