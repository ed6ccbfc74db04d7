package registry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/opemu/opemu/app/apptest"
	"github.com/opemu/opemu/application"
	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/cache/cachetest"
	"github.com/opemu/opemu/events"
	"github.com/opemu/opemu/registry"
	"github.com/opemu/opemu/registry/registrytest"
	"github.com/opemu/opemu/webhooks"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// The write path without HTTP: these call the registry directly.

var ctx = context.Background()

func appTarget(t testing.TB, env *registrytest.Env) registry.Target {
	t.Helper()
	k, ok := env.Kinds.Lookup("cloudnative.elide.dev", "v1", "applications")
	require.True(t, ok)
	return registry.Target{Kind: k, Key: cache.Key{Group: k.Group, Resource: k.Plural, Namespace: "default"}}
}

func appObj(replicas any, image string) map[string]any {
	return map[string]any{
		"apiVersion": "cloudnative.elide.dev/v1",
		"kind":       "Application",
		"metadata":   map[string]any{"name": "web"},
		"spec":       map[string]any{"replicas": replicas, "image": image, "extra": true},
		"status":     map[string]any{"phase": "Running"},
	}
}

func TestCreateRunsTheAdmissionOrder(t *testing.T) {
	t.Parallel()
	env := apptest.New(t, apptest.Options{})
	res, err := env.Registry.Create(ctx, appTarget(t, env), appObj(json.Number("2"), "nginx:1.27"), registry.Options{FieldValidation: "Warn"})
	require.NoError(t, err)
	got := cachetest.Decode(t, res.Object)
	spec := got["spec"].(map[string]any)
	assert.NotContains(t, spec, "extra", "pruned")
	assert.Equal(t, "RollingUpdate", spec["strategy"], "defaulted")
	assert.Equal(t, "elide-operator", got["metadata"].(map[string]any)["labels"].(map[string]any)["app.kubernetes.io/managed-by"], "mutated")
	assert.NotContains(t, got, "status", "status is dropped on create")
	assert.Contains(t, res.Warnings, `unknown field "spec.extra"`)
}

func TestCreateRejections(t *testing.T) {
	t.Parallel()
	env := apptest.New(t, apptest.Options{})
	tg := appTarget(t, env)
	tests := []struct {
		name string
		obj  map[string]any
		opts registry.Options
		code int32
	}{
		{"schema", appObj(json.Number("101"), "nginx:1"), registry.Options{}, http.StatusUnprocessableEntity},
		{"policy", appObj(json.Number("1"), "alpine:3"), registry.Options{}, http.StatusForbidden},
		{"strict", appObj(json.Number("1"), "nginx:1"), registry.Options{FieldValidation: "Strict"}, http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := env.Registry.Create(ctx, tg, tt.obj, tt.opts)
			var st apierrors.APIStatus
			require.True(t, errors.As(err, &st), "err %v", err)
			assert.Equal(t, tt.code, st.Status().Code)
		})
	}
	_, err := env.Storage.Get(ctx, cachetest.Key("default", "web"))
	require.ErrorIs(t, err, cache.ErrNotFound, "a rejected write stores nothing")
}

// TestUpdateRetriesWhenAnotherWriteWins makes the first attempt lose a race (a mutating
// webhook writes the object meanwhile): without a client resourceVersion the update is retried
// on the new state, admission included; with one, the conflict is returned.
func TestUpdateRetriesWhenAnotherWriteWins(t *testing.T) {
	t.Parallel()
	var storage cache.Interface
	calls, races, raced := 0, 0, 0
	racer := webhooks.HandlerFunc(func(_ context.Context, req *webhooks.Request) webhooks.Response {
		calls++
		if req.Operation == webhooks.Update && races > 0 {
			races--
			raced++
			_, err := storage.GuaranteedUpdate(ctx, cachetest.Key("default", "web"), cache.Preconditions{}, func(cur *cache.Object) (cache.Update, error) {
				obj, _ := cur.Decode()
				obj["metadata"].(map[string]any)["labels"] = map[string]any{"raced": fmt.Sprint("yes-", raced)}
				return cache.Update{Object: obj}, nil
			}, cache.WriteOptions{})
			require.NoError(t, err)
		}
		return webhooks.Allowed()
	})
	storage = cache.New(cache.Config{})
	env := apptest.New(t, apptest.Options{Options: registrytest.Options{Storage: storage, Admission: &webhooks.Chain{Mutating: []webhooks.Named{{Name: "racer", Handler: racer}}}}})
	tg := appTarget(t, env)
	_, err := env.Registry.Create(ctx, tg, appObj(json.Number("1"), "nginx:1"), registry.Options{})
	require.NoError(t, err)

	tg.Key.Name = "web"
	calls, races = 0, 1
	res, err := env.Registry.Patch(ctx, tg, "application/merge-patch+json", []byte(`{"spec":{"replicas":3}}`), registry.Options{})
	require.NoError(t, err)
	assert.Equal(t, 2, calls, "admission ran again on the retry")
	got := cachetest.Decode(t, res.Object)
	assert.Equal(t, json.Number("3"), got["spec"].(map[string]any)["replicas"])
	assert.Equal(t, map[string]any{"raced": "yes-1"}, got["metadata"].(map[string]any)["labels"], "the retry saw the other write")

	// The client's resourceVersion is a precondition: once the race makes it stale, the retry
	// stops with a conflict before admission runs again.
	calls, races = 0, 1
	pinned := fmt.Sprintf(`{"metadata":{"resourceVersion":"%d"},"spec":{"replicas":4}}`, res.Object.ResourceVersion())
	_, err = env.Registry.Patch(ctx, tg, "application/merge-patch+json", []byte(pinned), registry.Options{})
	require.ErrorIs(t, err, cache.ErrConflict)
	assert.Equal(t, 1, calls, "a client precondition is not retried")
}

// TestControllerWritesAreValidated: the in-process client the controller writes through runs
// the same schema validation as a client's write (SPEC §6), so an invalid status is a 422.
func TestControllerWritesAreValidated(t *testing.T) {
	t.Parallel()
	env := apptest.New(t, apptest.Options{})
	client := env.Registry.Client(application.Source)
	key := cachetest.Key("default", "web")
	o, err := client.Create(ctx, key, cachetest.App("web", 1))
	require.NoError(t, err)
	obj := cachetest.Decode(t, o)
	obj["status"] = map[string]any{"phase": "Sleeping", "readyReplicas": "three"}
	_, err = client.UpdateStatus(ctx, key, obj)
	require.True(t, apierrors.IsInvalid(err), "an invalid status is refused: %v", err)
	var st apierrors.APIStatus
	require.True(t, errors.As(err, &st))
	var fields []string
	for _, c := range st.Status().Details.Causes {
		fields = append(fields, c.Field)
	}
	assert.ElementsMatch(t, []string{"status.phase", "status.readyReplicas"}, fields)
	got, err := env.Storage.Get(ctx, key)
	require.NoError(t, err)
	assert.Same(t, o, got, "nothing was stored")

	obj["status"] = map[string]any{"phase": "Running", "readyReplicas": json.Number("1")}
	u, err := client.UpdateStatus(ctx, key, obj)
	require.NoError(t, err, "a valid status is stored")
	assert.Equal(t, "Running", cachetest.Decode(t, u)["status"].(map[string]any)["phase"])
}

// ttlStore records the TTL of every write it is asked to make.
type ttlStore struct {
	cache.Interface
	ttls map[cache.Key][]time.Duration
}

func (s *ttlStore) Create(ctx context.Context, key cache.Key, obj map[string]any, opts cache.WriteOptions) (*cache.Object, error) {
	s.ttls[key] = append(s.ttls[key], opts.TTL)
	return s.Interface.Create(ctx, key, obj, opts)
}

func (s *ttlStore) GuaranteedUpdate(ctx context.Context, key cache.Key, pre cache.Preconditions, try cache.UpdateFunc, opts cache.WriteOptions) (*cache.Object, error) {
	s.ttls[key] = append(s.ttls[key], opts.TTL)
	return s.Interface.GuaranteedUpdate(ctx, key, pre, try, opts)
}

// TestAKindsTTLGoesWithEveryWrite: the write path asks the store to expire the objects of a kind
// with a TTL (the Event kind's EVENT_TTL) that long after each write, and no other; Expire
// removes one at once, finalizers notwithstanding, and refuses an object of a kind without a TTL.
func TestAKindsTTLGoesWithEveryWrite(t *testing.T) {
	t.Parallel()
	storage := &ttlStore{Interface: cache.New(cache.Config{}), ttls: map[cache.Key][]time.Duration{}}
	env := registrytest.New(t, registrytest.Options{Storage: storage})
	client := env.Registry.Client("test")
	evKey := cache.Key{Resource: "events", Namespace: "default", Name: "e"}
	ev := map[string]any{"apiVersion": "v1", "kind": "Event", "metadata": map[string]any{"finalizers": []any{"example.com/keep"}}, "reason": "R"}
	o, err := client.Create(ctx, evKey, ev)
	require.NoError(t, err)
	obj := cachetest.Decode(t, o)
	obj["reason"] = "Again"
	_, err = client.Update(ctx, evKey, obj)
	require.NoError(t, err)
	cmKey := cache.Key{Resource: "configmaps", Namespace: "default", Name: "c"}
	_, err = client.Create(ctx, cmKey, map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{}})
	require.NoError(t, err)

	assert.Equal(t, []time.Duration{time.Hour, time.Hour}, storage.ttls[evKey], "an Event's create and update carry EVENT_TTL")
	assert.Equal(t, []time.Duration{0}, storage.ttls[cmKey])

	require.Error(t, client.Expire(ctx, cmKey), "a ConfigMap does not expire")
	_, err = env.Storage.Get(ctx, cmKey)
	require.NoError(t, err)
	require.NoError(t, client.Expire(ctx, evKey))
	_, err = env.Storage.Get(ctx, evKey)
	require.ErrorIs(t, err, cache.ErrNotFound, "expired at once, its finalizer notwithstanding")
	require.NoError(t, client.Expire(ctx, evKey), "a missing object is not an error")
}

// TestRejectionEventsOutliveTheRequestsDeadline: a write refused after its request's deadline
// passed (validation of a huge object under load) still leaves its Warning Event: the Event is
// not the client's write, so the deadline that stops that write does not stop it.
func TestRejectionEventsOutliveTheRequestsDeadline(t *testing.T) {
	t.Parallel()
	env := apptest.New(t, apptest.Options{Options: registrytest.Options{Events: func(c *registry.Client) registry.EventRecorder {
		return events.New(events.Config{Client: c})
	}}})
	late, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
	defer cancel()
	_, err := env.Registry.Create(late, appTarget(t, env), appObj(json.Number("101"), "nginx:1"), registry.Options{})
	require.True(t, apierrors.IsInvalid(err), "%v", err)
	res, err := env.Storage.List(ctx, events.Resource)
	require.NoError(t, err)
	require.Len(t, res.Items, 1)
	assert.Equal(t, "ValidationFailed", res.Items[0].Field("reason"))
}

// TestNamespaceRefusalsRecordNoEvent: a create refused because its namespace is missing (404)
// or Terminating (403) is refused before it is judged, the object's own faults notwithstanding,
// and no Warning Event is attempted (there is nowhere to put one: the recorder logs nothing).
func TestNamespaceRefusalsRecordNoEvent(t *testing.T) {
	t.Parallel()
	var log bytes.Buffer // the recorder writes synchronously (no queue)
	env := apptest.New(t, apptest.Options{Options: registrytest.Options{Events: func(c *registry.Client) registry.EventRecorder {
		return events.New(events.Config{Client: c, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	}}})
	env.Namespaces(t, "leaving")
	_, _, err := env.Registry.Client("test").Delete(ctx, cache.Key{Resource: "namespaces", Name: "leaving"}, cache.Preconditions{})
	require.NoError(t, err)
	target := appTarget(t, env)
	for ns, refused := range map[string]func(error) bool{"missing": apierrors.IsNotFound, "leaving": apierrors.IsForbidden} {
		target.Key.Namespace = ns
		_, err := env.Registry.Create(ctx, target, appObj(json.Number("101"), "nginx:1"), registry.Options{})
		require.True(t, refused(err), "%s: %v", ns, err)
	}
	res, err := env.Storage.List(ctx, events.Resource)
	require.NoError(t, err)
	assert.Empty(t, res.Items)
	assert.Empty(t, log.String())
}

// TestWritesRecordTheirManager: a create and an update record their ownership (an Update by the
// field manager, else the user agent's first part). (Go numbers in an in-process writer's map:
// faults' TestCountSurvivesUpdates.)
func TestWritesRecordTheirManager(t *testing.T) {
	t.Parallel()
	env := apptest.New(t, apptest.Options{})
	target := appTarget(t, env)
	res, err := env.Registry.Create(ctx, target, appObj(json.Number("2"), "nginx:1.27"), registry.Options{UserAgent: "my-operator/v1.2.3 (linux/amd64)"})
	require.NoError(t, err)
	managed := func(o *cache.Object) []any {
		md := cachetest.Decode(t, o)["metadata"].(map[string]any)
		list, _ := md["managedFields"].([]any)
		return list
	}
	created := managed(res.Object)
	require.Len(t, created, 1)
	entry := created[0].(map[string]any)
	assert.Equal(t, "my-operator", entry["manager"])
	assert.Equal(t, "Update", entry["operation"])
	assert.Contains(t, entry["fieldsV1"].(map[string]any)["f:spec"], "f:replicas")

	target.Key.Name = "web"
	res, err = env.Registry.Update(ctx, target, appObj(json.Number("3"), "nginx:1.28"), registry.Options{FieldManager: "updater"})
	require.NoError(t, err)
	var managers []string
	for _, e := range managed(res.Object) {
		managers = append(managers, e.(map[string]any)["manager"].(string))
	}
	assert.ElementsMatch(t, []string{"my-operator", "updater"}, managers, "the update owns what it changed")
}
