package registry

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/opemu/opemu/events"
	"github.com/opemu/opemu/kinds"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestSameOwnerUpdate holds the shortcut of trackUpdate (sameOwnerUpdate) to the field manager:
// where it answers, the field manager gives the same entry; where the field manager would
// change what is owned, it does not answer.
func TestSameOwnerUpdate(t *testing.T) {
	widget := &kinds.Kind{Group: "example.com", Version: "v1", Kind: "Widget", Plural: "widgets", Namespaced: true}
	event := kinds.EventKind()
	ev := events.Stored{Event: events.Event{Object: events.Ref{APIVersion: "v1", Kind: "Widget", Namespace: "ns", Name: "w"},
		Type: "Normal", Severity: events.Info, Reason: "Updated", Message: "one", Source: "opemu"}, Time: time.Now()}
	o := Options{FieldManager: "writer"}
	other := Options{FieldManager: "someone-else"}
	cases := []struct {
		name     string
		kind     *kinds.Kind
		live     map[string]any
		change   func(next map[string]any)
		o        Options
		answered bool
		admitted func(live map[string]any) // what admission added to live, after its ownership
	}{
		{"an Event aggregated", event, ev.Object(), func(n map[string]any) {
			n["count"], n["message"], n["lastTimestamp"] = json.Number("2"), "two", "2030-01-01T00:00:00Z"
		}, o, true, nil},
		{"a custom resource's spec", widget, widget1(), func(n map[string]any) { n["spec"].(map[string]any)["replicas"] = json.Number("3") }, o, true, nil},
		{"the same number as a float", widget, widget1(), func(n map[string]any) { n["spec"].(map[string]any)["replicas"] = 1.0 }, o, true, nil},
		{"nothing", widget, widget1(), func(map[string]any) {}, o, true, nil},
		{"a field added", widget, widget1(), func(n map[string]any) { n["spec"].(map[string]any)["extra"] = "x" }, o, false, nil},
		{"a field removed", widget, widget1(), func(n map[string]any) { delete(n["spec"].(map[string]any), "image") }, o, false, nil},
		{"another manager", widget, widget1(), func(n map[string]any) { n["spec"].(map[string]any)["replicas"] = json.Number("3") }, other, false, nil},
		{"a label", widget, widget1(), func(n map[string]any) { metadataOf(n)["labels"] = map[string]any{"a": "b"} }, o, false, nil},
		{"a nested field of a typed kind", event, ev.Object(), func(n map[string]any) { n["involvedObject"].(map[string]any)["name"] = "v" }, o, false, nil},
		{"a list", widget, widget1(), func(n map[string]any) { n["spec"].(map[string]any)["ports"] = []any{json.Number("81")} }, o, false, nil},
		{"a label nobody owns left out", widget, widget1(), func(n map[string]any) {
			delete(metadataOf(n), "labels")
			n["spec"].(map[string]any)["replicas"] = json.Number("3")
		}, o, true, func(live map[string]any) { metadataOf(live)["labels"] = map[string]any{"by": "webhook"} }},
		{"an owned label left out", widget, withLabel(widget1()), func(n map[string]any) { delete(metadataOf(n), "labels") }, o, false, nil},
		{"an owned label changed", widget, withLabel(widget1()), func(n map[string]any) { metadataOf(n)["labels"] = map[string]any{"app": "v"} }, o, true, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := &Store{}
			tg := Target{Kind: c.kind}
			live := c.live
			require.NoError(t, s.trackCreate(tg, live, o))
			if c.admitted != nil {
				c.admitted(live)
			}
			require.Len(t, metadataOf(live)["managedFields"], 1)
			next := deepCopy(live)
			for _, m := range []string{"resourceVersion", "uid", "creationTimestamp"} {
				delete(metadataOf(next), m) // as a client's PUT sends it: nobody's
			}
			c.change(next)
			entry, ok := sameOwnerUpdate(tg, live, next, c.o)
			require.Equal(t, c.answered, ok)
			if !ok {
				return
			}
			// trackUpdate gives next the entry, or live's managedFields when the write
			// changes nothing (a client's PUT sends none).
			tracked := deepCopy(next)
			delete(metadataOf(tracked), "managedFields")
			tracked, err := s.trackUpdate(tg, live, tracked, c.o, true)
			require.NoError(t, err)
			require.Len(t, metadataOf(tracked)["managedFields"], 1)
			fm, err := s.managerFor(c.kind, "")
			require.NoError(t, err)
			out, err := fm.Update(&unstructured.Unstructured{Object: managedCopy(c.kind, live)}, &unstructured.Unstructured{Object: managedCopy(c.kind, next)}, writeManager(c.o))
			require.NoError(t, err)
			want := metadataOf(out.(*unstructured.Unstructured).Object)["managedFields"].([]any)
			require.Len(t, want, 1)
			if entry == nil {
				entry = metadataOf(live)["managedFields"].([]any)[0].(map[string]any)
			}
			wantEntry, gotEntry := jsonOf(t, want[0]), jsonOf(t, entry)
			delete(wantEntry, "time")
			delete(gotEntry, "time")
			assert.Equal(t, wantEntry, gotEntry)
		})
	}
}

func withLabel(obj map[string]any) map[string]any {
	metadataOf(obj)["labels"] = map[string]any{"app": "w"}
	return obj
}

func widget1() map[string]any {
	return map[string]any{"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w", "namespace": "ns", "resourceVersion": "5", "uid": "u", "creationTimestamp": "2026-11-27T08:00:00Z"},
		"spec":     map[string]any{"replicas": json.Number("1"), "image": "nginx", "ports": []any{json.Number("80")}}}
}

// jsonOf is v as encoding/json reads it back.
func jsonOf(t *testing.T, v any) map[string]any {
	raw, err := json.Marshal(v)
	require.NoError(t, err)
	var out map[string]any
	require.NoError(t, json.Unmarshal(raw, &out))
	return out
}

// TestCreateShapes holds the entries trackCreate remembers by shape to the field manager's: a
// create of a custom resource shaped as an earlier one gets what a Registry that never saw it
// computes, whatever its values; another shape is computed afresh.
func TestCreateShapes(t *testing.T) {
	widget := &kinds.Kind{Group: "example.com", Version: "v1", Kind: "Widget", Plural: "widgets", Namespaced: true}
	o := Options{FieldManager: "writer"}
	objs := []map[string]any{
		widget1(),
		withLabel(widget1()),
		{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]any{"name": "v", "namespace": "ns"},
			"spec": map[string]any{"replicas": 2.5, "image": "", "ports": []any{}}},
		{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]any{"name": "v", "namespace": "ns", "labels": map[string]any{"a:b": "c"}},
			"spec": map[string]any{"replicas": nil, "image": map[string]any{}, "ports": "x"}},
		{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]any{"name": "v", "namespace": "ns"},
			"spec": map[string]any{"replicas": json.Number("7"), "image": map[string]any{"a": true}, "ports": []any{map[string]any{"p": 1}}}},
	}
	cached := &Store{}
	for _, first := range objs {
		require.NoError(t, cached.trackCreate(Target{Kind: widget}, deepCopy(first), o))
	}
	for i, obj := range objs {
		fresh := &Store{}
		want, have := deepCopy(obj), deepCopy(obj)
		require.NoError(t, fresh.trackCreate(Target{Kind: widget}, want, o))
		require.NoError(t, cached.trackCreate(Target{Kind: widget}, have, o))
		w := metadataOf(want)["managedFields"].([]any)[0].(map[string]any)
		h := metadataOf(have)["managedFields"].([]any)[0].(map[string]any)
		assert.Equal(t, w["fieldsV1"], h["fieldsV1"], "object %d", i)
		assert.Equal(t, w["manager"], h["manager"])
		assert.Equal(t, len(w), len(h), "the entry's members")
	}
	// Same shape, other values: remembered (five shapes, not more).
	again := withLabel(widget1())
	metadataOf(again)["labels"] = map[string]any{"app": "other"}
	again["spec"].(map[string]any)["replicas"] = json.Number("9")
	require.NoError(t, cached.trackCreate(Target{Kind: widget}, again, o))
	assert.EqualValues(t, len(objs), cached.createShapes.Load())
}
