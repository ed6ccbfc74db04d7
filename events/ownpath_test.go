package events_test

import (
	"context"
	"testing"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/events"
	"github.com/opemu/opemu/kinds"
	"github.com/opemu/opemu/registry"
	"github.com/opemu/opemu/registry/registrytest"
	"github.com/opemu/opemu/webhooks"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"
)

// The recorder's own Events skip admission and validation (registry.Client.CreateEvent). These
// tests hold that cheaper path to what the full write path would do with the same Event.

type ownPathEnv struct {
	env    *registrytest.Env
	client *registry.Client
	rec    *events.Recorder
}

func newOwnPathEnv(t testing.TB, limit int) ownPathEnv {
	t.Helper()
	// An empty admission chain: TestRecorderEventsGoThroughAConfiguredChain configures one.
	env := registrytest.New(t, registrytest.Options{Admission: &webhooks.Chain{}, EventLimit: limit})
	client := env.Registry.Client("opemu-events")
	c := clocktesting.NewFakeClock(time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC))
	rec := events.New(events.Config{Client: client, Host: "pod-1", Clock: c})
	return ownPathEnv{env, client, rec}
}

// only returns the one Event stored in ns.
func (e ownPathEnv) only(t testing.TB, ns string) *cache.Object {
	t.Helper()
	res, err := e.env.Storage.List(context.Background(), events.Resource, cache.InNamespace(ns))
	require.NoError(t, err)
	require.Len(t, res.Items, 1)
	return res.Items[0]
}

// withoutServerFields decodes o without what the server stamps differently on every create.
func withoutServerFields(t testing.TB, o *cache.Object) map[string]any {
	t.Helper()
	obj, err := o.Decode()
	require.NoError(t, err)
	md := obj["metadata"].(map[string]any)
	for _, f := range []string{"name", "uid", "resourceVersion", "creationTimestamp"} {
		delete(md, f)
	}
	managed, _ := md["managedFields"].([]any)
	for _, e := range managed {
		delete(e.(map[string]any), "time")
	}
	return obj
}

// FuzzRecorderEvent records an Event of arbitrary text on the cheaper path, then creates the
// same Event through the full write path (pruning, defaulting, admission, validation): the
// full path must accept it and store the same object.
func FuzzRecorderEvent(f *testing.F) {
	f.Add("Application", "web", "Created", "Created Application default/web", "opemu-apiserver", false)
	f.Add("Deployment", "a.b-c", "ReconcileError", "boom: \"quoted\" \x00 \u2028 é", "system:admin", true)
	f.Add("", "", "", "", "", false)
	f.Add("K", string(make([]byte, 300)), "R", "\xff\xfe invalid utf-8", "me", true)
	f.Fuzz(func(t *testing.T, kind, name, reason, message, source string, warning bool) {
		e := newOwnPathEnv(t, 0)
		typ := events.TypeNormal
		if warning {
			typ = events.TypeWarning
		}
		e.rec.Record(context.Background(), events.Event{
			Object: events.Ref{APIVersion: "v1", Kind: kind, Namespace: "default", Name: name, UID: "u-1", ResourceVersion: "7"},
			Type:   typ, Reason: reason, Message: message, Source: source,
		})
		cheap := e.only(t, "default")
		want := withoutServerFields(t, cheap)

		obj, err := cheap.Decode()
		require.NoError(t, err)
		obj["metadata"] = map[string]any{"name": "through-the-full-path", "namespace": "default"}
		full, err := e.client.Create(context.Background(), cache.Key{Resource: events.Resource.Resource, Namespace: "default", Name: "through-the-full-path"}, obj)
		require.NoError(t, err, "the full write path refuses what the recorder stored")
		got := withoutServerFields(t, full)
		assert.Equal(t, want, got)

		for _, f := range kinds.EventKind().Fields {
			assert.Equal(t, full.Field(f.Name), cheap.Field(f.Name), "field %s", f.Name)
		}
		assert.Equal(t, full.Generation(), cheap.Generation())
		assert.Empty(t, cheap.Labels())
		assert.Empty(t, cheap.Finalizers())
	})
}

// TestRecorderEventsGoThroughAConfiguredChain: with admission handlers configured, the
// recorder's Events take the full write path and the chain decides (the handlers of package
// hooks leave opemu's own Events out); one that matches them is asked and its patch applies.
func TestRecorderEventsGoThroughAConfiguredChain(t *testing.T) {
	t.Parallel()
	e := newOwnPathEnv(t, 0)
	seen := 0
	e.env.Admission.Configured = configured{mutating: []webhooks.Named{{Name: "label-events", External: true, Handler: webhooks.HandlerFunc(
		func(_ context.Context, req *webhooks.Request) webhooks.Response {
			if req.Resource.Resource == "events" {
				seen++
			}
			return webhooks.Response{Allowed: true, Patch: []webhooks.PatchOperation{{Op: "add", Path: "/metadata/labels", Value: map[string]any{"seen-by": "webhook"}}}}
		})}}}
	e.rec.Record(context.Background(), ev("web", "Created"))
	assert.Equal(t, 1, seen, "a configured webhook is asked about the recorder's Event")
	assert.Equal(t, "webhook", e.only(t, "default").Labels()["seen-by"])
}

func TestLimitRemovesEventsWhateverTheirFinalizers(t *testing.T) {
	t.Parallel()
	e := newOwnPathEnv(t, 1)
	e.rec.Record(context.Background(), ev("first", "Created"))
	held := e.only(t, "default")
	obj, err := held.Decode()
	require.NoError(t, err)
	obj["metadata"].(map[string]any)["finalizers"] = []any{"example.com/keep"}
	_, err = e.client.Update(context.Background(), held.Key(), obj)
	require.NoError(t, err)

	e.rec.Record(context.Background(), ev("second", "Created"))
	_, err = e.env.Storage.Get(context.Background(), held.Key())
	require.ErrorIs(t, err, cache.ErrNotFound, "an Event the limit drops goes as an expired one does, finalizers notwithstanding")
	assert.Equal(t, "second", e.only(t, "default").Field("involvedObject.name"))
}

type configured struct{ mutating, validating []webhooks.Named }

func (c configured) Handlers() (m, v []webhooks.Named) { return c.mutating, c.validating }
