package registry_test

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/opemu/opemu/app/apptest"
	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/registry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/fields"
)

// next returns the next event of w the client gets, failing after a second.
func next(t *testing.T, w *registry.Watcher) (registry.Event, bool) {
	t.Helper()
	for {
		select {
		case ev, ok := <-w.Events():
			if !ok {
				return registry.Event{}, false
			}
			if out, wanted := w.Event(ev); wanted {
				return out, true
			}
		case <-time.After(time.Second):
			t.Fatal("no event within a second")
		}
	}
}

func TestWatchStartsWhereKubernetesDoes(t *testing.T) {
	t.Parallel()
	env := apptest.New(t, apptest.Options{})
	tg := appTarget(t, env)
	res, err := env.Registry.Create(ctx, tg, appObj(json.Number("1"), "nginx:1"), registry.Options{})
	require.NoError(t, err)
	rv := res.Object.ResourceVersion()
	yes, no := true, false
	tests := []struct {
		name  string
		opts  registry.WatchOptions
		types []cache.EventType // the first events the client gets
	}{
		{"no version: the current objects", registry.WatchOptions{}, []cache.EventType{cache.Added}},
		{"version 0: the current objects", registry.WatchOptions{ResourceVersion: "0"}, []cache.EventType{cache.Added}},
		{"watch-list without bookmarks: no end bookmark", registry.WatchOptions{SendInitialEvents: &yes}, []cache.EventType{cache.Added}},
		{"watch-list with bookmarks: the end bookmark", registry.WatchOptions{SendInitialEvents: &yes, AllowWatchBookmarks: true}, []cache.EventType{cache.Added, cache.Bookmark}},
		{"no initial events: from the version on", registry.WatchOptions{SendInitialEvents: &no, ResourceVersion: formatRV(rv - 1)}, []cache.EventType{cache.Added}},
		{"a version: every change after it", registry.WatchOptions{ResourceVersion: formatRV(rv - 1)}, []cache.EventType{cache.Added}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := env.Registry.Watch(ctx, tg, tt.opts)
			require.NoError(t, err)
			defer w.Stop()
			for _, typ := range tt.types {
				ev, ok := next(t, w)
				require.True(t, ok)
				assert.Equal(t, typ, ev.Type)
			}
			if len(tt.types) == 1 {
				// The bookmark ending the initial events, if any, is not the client's.
				select {
				case ev := <-w.Events():
					_, wanted := w.Event(ev)
					assert.False(t, wanted, "%v", ev.Type)
				default:
				}
			}
		})
	}
}

func TestWatchOfAVersionNotServedStartsClosedWith410(t *testing.T) {
	t.Parallel()
	env := apptest.New(t, apptest.Options{})
	w, err := env.Registry.Watch(ctx, appTarget(t, env), registry.WatchOptions{ResourceVersion: "1"})
	require.NoError(t, err, "a 410 goes in the stream, not as the request's answer")
	defer w.Stop()
	_, open := next(t, w)
	assert.False(t, open)
	require.ErrorIs(t, w.Err(), cache.ErrGone)
	_, ok := w.Progress()
	assert.False(t, ok)

	sse, err := env.Registry.WatchResources(ctx, registry.ResourcesOptions{After: 1})
	require.NoError(t, err)
	defer sse.Stop()
	_, open = next(t, sse)
	assert.False(t, open)
	require.ErrorIs(t, sse.Err(), cache.ErrGone)
}

// TestWatchOfAView: a watch of events.k8s.io/v1 Events selects with the view's field names and
// gets each stored v1 Event converted.
func TestWatchOfAView(t *testing.T) {
	t.Parallel()
	env := apptest.New(t, apptest.Options{})
	view, ok := env.Kinds.Lookup("events.k8s.io", "v1", "events")
	require.True(t, ok)
	core, ok := env.Kinds.Lookup("", "v1", "events")
	require.True(t, ok)
	ns := cache.Key{Group: core.Group, Resource: core.Plural, Namespace: "default"}
	for _, name := range []string{"web", "db"} {
		_, err := env.Registry.Create(ctx, registry.Target{Kind: core, Key: ns}, map[string]any{
			"apiVersion": "v1", "kind": "Event",
			"metadata":       map[string]any{"name": name + ".1"},
			"involvedObject": map[string]any{"kind": "Application", "name": name, "namespace": "default"},
			"reason":         "Test", "message": "m", "type": "Normal",
		}, registry.Options{})
		require.NoError(t, err)
	}
	vk := view.GroupResource() // a view's objects are stored as the v1 kind's
	w, err := env.Registry.Watch(ctx, registry.Target{Kind: view, Key: cache.Key{Group: vk.Group, Resource: vk.Resource, Namespace: "default"}},
		registry.WatchOptions{Field: fields.OneTermEqualSelector("regarding.name", "db")})
	require.NoError(t, err)
	defer w.Stop()
	ev, ok := next(t, w)
	require.True(t, ok)
	raw, err := ev.JSON()
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, json.Unmarshal(raw, &got))
	assert.Equal(t, "events.k8s.io/v1", got["apiVersion"])
	assert.Equal(t, "db", got["regarding"].(map[string]any)["name"])
	assert.Equal(t, "db", cacheName(ev.Object))
	select {
	case ev := <-w.Events():
		_, wanted := w.Event(ev)
		assert.False(t, wanted, "only the selected Event, then the end of the initial events: %v", ev.Type)
	default:
	}
}

func cacheName(o *cache.Object) string {
	var m struct {
		InvolvedObject struct{ Name string } `json:"involvedObject"`
	}
	_ = json.Unmarshal(o.Raw(), &m)
	return m.InvolvedObject.Name
}

func formatRV(rv uint64) string { return strconv.FormatUint(rv, 10) }
