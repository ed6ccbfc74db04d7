package workloads_test

import (
	"context"
	"encoding/json"
	"reflect"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/events"
	"github.com/opemu/opemu/registry"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var ctx = context.Background()

// recorder keeps Events in memory.
type recorder struct {
	mu  sync.Mutex
	evs []events.Event
}

func (r *recorder) Record(_ context.Context, ev events.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evs = append(r.evs, ev)
}

func (r *recorder) messages(reason string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.evs {
		if e.Reason == reason {
			out = append(out, e.Message)
		}
	}
	return out
}

// rig is the write path and the controllers over it (newCluster), inside a synctest bubble.
type rig struct {
	t      *testing.T
	client *registry.Client
	events *recorder
	stop   func()
}

// create stores a typed object.
func (r *rig) create(key cache.Key, obj any) {
	r.t.Helper()
	raw, err := json.Marshal(obj)
	require.NoError(r.t, err)
	m, err := cache.DecodeJSON(raw)
	require.NoError(r.t, err)
	_, err = r.client.Create(ctx, key, m)
	require.NoError(r.t, err)
}

// get decodes the stored object at key into v (made zero first: omitted fields are zero) and
// returns its resourceVersion.
func (r *rig) get(key cache.Key, v any) uint64 {
	r.t.Helper()
	o, err := r.client.Get(ctx, key)
	require.NoError(r.t, err)
	reflect.ValueOf(v).Elem().SetZero()
	require.NoError(r.t, json.Unmarshal(o.Raw(), v))
	return o.ResourceVersion()
}

// update reads key into v, applies fn and stores it.
func (r *rig) update(key cache.Key, v any, fn func()) {
	r.t.Helper()
	r.get(key, v)
	fn()
	raw, err := json.Marshal(v)
	require.NoError(r.t, err)
	m, err := cache.DecodeJSON(raw)
	require.NoError(r.t, err)
	_, err = r.client.Update(ctx, key, m)
	require.NoError(r.t, err)
}

// tick lets one virtual second pass and the controller act on it.
func tick() {
	time.Sleep(time.Second)
	synctest.Wait()
}

func podTemplate(image string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: image}}},
	}
}

func deployKey(name string) cache.Key {
	return cache.Key{Group: "apps", Resource: "deployments", Namespace: "default", Name: name}
}

// counts are a Deployment's status counts: replicas, updated, ready, available.
func counts(d appsv1.Deployment) [4]int32 {
	return [4]int32{d.Status.Replicas, d.Status.UpdatedReplicas, d.Status.ReadyReplicas, d.Status.AvailableReplicas}
}

func condition(d appsv1.Deployment, t appsv1.DeploymentConditionType) appsv1.DeploymentCondition {
	for _, c := range d.Status.Conditions {
		if c.Type == t {
			return c
		}
	}
	return appsv1.DeploymentCondition{}
}
