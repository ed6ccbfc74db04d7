package stages_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"text/template"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/events"
	"github.com/opemu/opemu/registry"
	"github.com/opemu/opemu/registry/registrytest"
	"github.com/opemu/opemu/stages"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/kwok/pkg/apis/v1alpha1"
	"sigs.k8s.io/yaml"
)

var ctx = context.Background()

// rig is a write path serving the Stage kind, an Engine over it on a fake clock, and the
// Events it recorded.
type rig struct {
	t      testing.TB
	client *registry.Client
	clock  *clocktesting.FakeClock
	engine *stages.Engine
	events *recorder
}

type recorder struct {
	mu  sync.Mutex
	evs []events.Event
}

func (r *recorder) Record(_ context.Context, ev events.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evs = append(r.evs, ev)
}

// funcs are the kubelets' template functions, answered as one Node would.
var funcs = template.FuncMap{
	"NodeIPWith":  func(string) string { return "172.18.0.2" },
	"NodeIPsWith": func(string) []string { return []string{"172.18.0.2"} },
	"PodIPWith":   func(string, bool, string, string, string) string { return "10.244.0.7" },
	"PodIPsWith":  func(string, bool, string, string, string) []string { return []string{"10.244.0.7"} },
}

// newRig: fixed, when not nil, are the Stages played (else those stored).
func newRig(t testing.TB, fixed []*v1alpha1.Stage) *rig {
	t.Helper()
	c, err := stages.CRD()
	require.NoError(t, err)
	env := registrytest.New(t, registrytest.Options{BuiltIns: []*apiextv1.CustomResourceDefinition{c}})
	r := &rig{t: t, client: env.Registry.Client("test"), clock: clocktesting.NewFakeClock(time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)), events: &recorder{}}
	r.engine, err = stages.New(stages.Config{Client: env.Registry.Client("kubelet"), Events: r.events, Clock: r.clock, Funcs: funcs, Fixed: fixed})
	require.NoError(t, err)
	return r
}

func defaults(t testing.TB, d stages.Delays) []*v1alpha1.Stage {
	t.Helper()
	s, err := stages.Defaults(d)
	require.NoError(t, err)
	return s
}

// pod creates the Pod name, bound, with labels and the owner kind (none when empty).
func (r *rig) pod(name string, labels map[string]any, owner string) {
	r.t.Helper()
	obj := map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": name, "namespace": "default", "labels": labels},
		"spec": map[string]any{"nodeName": "opemu-control-plane", "containers": []any{map[string]any{"name": "c", "image": "nginx"}}}}
	if owner != "" {
		obj["metadata"].(map[string]any)["ownerReferences"] = []any{map[string]any{"apiVersion": "batch/v1", "kind": owner, "name": "o", "uid": "u1", "controller": true}}
	}
	_, err := r.client.Create(ctx, podKey(name), obj)
	require.NoError(r.t, err)
}

func podKey(name string) cache.Key {
	return cache.Key{Resource: "pods", Namespace: "default", Name: name}
}

// play is one pass of the Engine over the Pod name: its wait, and the Pod after it (nil: gone).
func (r *rig) play(name string) (time.Duration, *corev1.Pod) {
	r.t.Helper()
	obj, err := r.client.Get(ctx, podKey(name))
	require.NoError(r.t, err)
	var pod corev1.Pod
	require.NoError(r.t, json.Unmarshal(obj.Raw(), &pod))
	wait, deleted, err := r.engine.PlayPod(ctx, obj, &pod)
	require.NoError(r.t, err)
	obj, err = r.client.Get(ctx, podKey(name))
	if deleted {
		require.ErrorIs(r.t, err, cache.ErrNotFound)
		return wait, nil
	}
	require.NoError(r.t, err)
	var after corev1.Pod
	require.NoError(r.t, json.Unmarshal(obj.Raw(), &after))
	return wait, &after
}

// TestDefaultStages: kwok's default stages run a bound Pod (pod-ready, after its delay on the
// clock), complete a Job's Pod (pod-complete, after its delay) but not another's, and remove
// a Pod being deleted (pod-delete).
func TestDefaultStages(t *testing.T) {
	r := newRig(t, defaults(t, stages.Delays{Ready: 2 * time.Second, Complete: 5 * time.Second}))
	r.pod("job-pod", nil, "Job")
	r.pod("rs-pod", nil, "ReplicaSet")

	wait, pod := r.play("job-pod")
	assert.Equal(t, 2*time.Second, wait, "pod-ready waits ROLLOUT_STEP")
	assert.Equal(t, corev1.PodPending, pod.Status.Phase)
	r.clock.Step(time.Second)
	wait, _ = r.play("job-pod")
	assert.Equal(t, time.Second, wait, "the delay counts from the first match")
	r.clock.Step(time.Second)
	wait, pod = r.play("job-pod")
	assert.Equal(t, 5*time.Second, wait, "Running, it waits for pod-complete")
	assert.Equal(t, corev1.PodRunning, pod.Status.Phase)
	assert.Equal(t, "10.244.0.7", pod.Status.PodIP)
	assert.Equal(t, "172.18.0.2", pod.Status.HostIP)
	assert.Equal(t, r.clock.Now(), pod.Status.StartTime.UTC(), "Now is the clock's")
	require.Len(t, pod.Status.ContainerStatuses, 1)
	assert.True(t, pod.Status.ContainerStatuses[0].Ready)
	ready := map[corev1.PodConditionType]corev1.ConditionStatus{}
	for _, c := range pod.Status.Conditions {
		ready[c.Type] = c.Status
	}
	assert.Equal(t, corev1.ConditionTrue, ready[corev1.PodReady])

	r.clock.Step(5 * time.Second)
	wait, pod = r.play("job-pod")
	assert.Zero(t, wait)
	assert.Equal(t, corev1.PodSucceeded, pod.Status.Phase, "a Job's Pod completes")
	term := pod.Status.ContainerStatuses[0].State.Terminated
	require.NotNil(t, term)
	assert.Equal(t, "Completed", term.Reason)
	assert.Zero(t, term.ExitCode)

	r.clock.Step(2 * time.Second)
	wait, pod = r.play("rs-pod")
	assert.Equal(t, 2*time.Second, wait)
	r.clock.Step(2 * time.Second)
	wait, pod = r.play("rs-pod")
	assert.Zero(t, wait, "a ReplicaSet's Pod runs on: no Stage matches")
	assert.Equal(t, corev1.PodRunning, pod.Status.Phase)

	_, _, err := r.client.DeleteWithGrace(ctx, podKey("rs-pod"), cache.Preconditions{}, 30)
	require.NoError(t, err)
	_, pod = r.play("rs-pod")
	assert.Nil(t, pod, "pod-delete removes a Pod being deleted")
}

// TestStoredStages: the Stages stored in the API are played, read again after a change; one
// that cannot be compiled is reported and the others still play; a Stage's steps add a
// finalizer and record its Event; the heavier of two matching Stages wins.
func TestStoredStages(t *testing.T) {
	r := newRig(t, nil)
	store := func(manifest string) {
		t.Helper()
		var obj map[string]any
		require.NoError(t, yaml.Unmarshal([]byte(manifest), &obj))
		_, err := r.client.Create(ctx, cache.Key{Group: "kwok.x-k8s.io", Resource: "stages", Name: obj["metadata"].(map[string]any)["name"].(string)}, obj)
		require.NoError(t, err)
	}
	store(`
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {name: broken}
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchExpressions:
    - {key: '.status.phase | [[[', operator: Exists}
  next: {delete: true}
`)
	store(`
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {name: hold}
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchLabels: {app: held}
    matchExpressions:
    - {key: '.metadata.finalizers', operator: DoesNotExist}
  weight: 1
  next:
    finalizers:
      add: [{value: example.com/hold}]
    event: {type: Normal, reason: Held, message: held by a Stage}
`)
	store(`
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {name: never}
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchLabels: {app: held}
    matchExpressions:
    - {key: '.metadata.finalizers', operator: DoesNotExist}
  weight: 0
  next: {delete: true}
`)
	for i := range 8 { // weights: "never" (0) loses to "hold" (1) every time
		name := fmt.Sprintf("p%d", i)
		r.pod(name, map[string]any{"app": "held"}, "")
		wait, pod := r.play(name)
		assert.Zero(t, wait)
		require.NotNil(t, pod, "the Stage of weight 0 never wins over one of weight 1")
		assert.Equal(t, []string{"example.com/hold"}, pod.Finalizers)
		assert.Nil(t, pod.DeletionTimestamp)
	}
	assert.Contains(t, r.engine.Invalid(), "broken")
	r.events.mu.Lock()
	require.Len(t, r.events.evs, 8)
	assert.Equal(t, "Normal", r.events.evs[0].Type)
	assert.Equal(t, "Held", r.events.evs[0].Reason)
	assert.Equal(t, "held by a Stage", r.events.evs[0].Message)
	assert.Equal(t, "p0", r.events.evs[0].Object.Name)
	r.events.mu.Unlock()

	// Replaced: the Engine reads the Stages again after a change (Follow says so).
	_, _, err := r.client.Delete(ctx, cache.Key{Group: "kwok.x-k8s.io", Resource: "stages", Name: "hold"}, cache.Preconditions{})
	require.NoError(t, err)
	r.engine.Reset()
	r.pod("q", map[string]any{"app": "held"}, "")
	_, pod := r.play("q")
	assert.Nil(t, pod, "without hold, never is the only Stage that matches: it deletes the Pod")
}

// TestPlayPodConcurrently: the kubelets' workers play different Pods at once (the controller
// runs several), each to Running and, for a Job's, to Succeeded; the race detector watches the
// Engine's and kwok's shared state.
func TestPlayPodConcurrently(t *testing.T) {
	r := newRig(t, defaults(t, stages.Delays{}))
	const pods = 16
	for i := range pods {
		r.pod(fmt.Sprintf("p%d", i), map[string]any{"app": "a"}, "Job")
	}
	var wg sync.WaitGroup
	phases := make([]corev1.PodPhase, pods)
	for i := range pods {
		wg.Go(func() {
			name := fmt.Sprintf("p%d", i)
			obj, err := r.client.Get(ctx, podKey(name))
			if !assert.NoError(t, err) {
				return
			}
			var pod corev1.Pod
			if !assert.NoError(t, json.Unmarshal(obj.Raw(), &pod)) {
				return
			}
			_, _, err = r.engine.PlayPod(ctx, obj, &pod)
			assert.NoError(t, err)
			obj, err = r.client.Get(ctx, podKey(name))
			if assert.NoError(t, err) && assert.NoError(t, json.Unmarshal(obj.Raw(), &pod)) {
				phases[i] = pod.Status.Phase
			}
		})
	}
	wg.Wait()
	for i, ph := range phases {
		assert.Equal(t, corev1.PodSucceeded, ph, "p%d: pod-ready then pod-complete, both without delay", i)
	}
}
