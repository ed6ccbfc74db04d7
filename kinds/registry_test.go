package kinds_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/kinds"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/fields"
)

func widget(version string) *kinds.Kind {
	return &kinds.Kind{Group: "example.com", Version: version, Kind: "Widget", ListKind: "WidgetList", Plural: "widgets",
		Singular: "widget", ShortNames: []string{"wd"}, Namespaced: true, CRDName: "widgets.example.com",
		Fields: []kinds.Field{{Name: "spec.color"}, {Name: "size", Path: ".spec.size"}}}
}

func TestRegistryServesBuiltInsAndCRDKinds(t *testing.T) {
	t.Parallel()
	r := kinds.New()
	ns, ok := r.Lookup("", "v1", "namespaces")
	require.True(t, ok)
	assert.True(t, ns.BuiltIn())
	assert.Equal(t, kinds.Namespaces, ns.GroupResource())
	require.Error(t, r.Add(&kinds.Kind{Version: "v1", Kind: "Namespace", ListKind: "NamespaceList", Plural: "namespaces", Singular: "namespace"}),
		"a resource is served once")

	gen := r.Generation()
	v1, beta := widget("v1"), widget("v1beta1")
	r.Replace("widgets.example.com", []*kinds.Kind{beta, v1}, v1)
	assert.Greater(t, r.Generation(), gen)
	got, ok := r.Lookup("example.com", "v1beta1", "widgets")
	require.True(t, ok)
	assert.Same(t, beta, got)
	storage, ok := r.Resource(cache.GroupResource{Group: "example.com", Resource: "widgets"})
	require.True(t, ok)
	assert.Same(t, v1, storage, "the resource is stored in its storage version")
	k, ok := r.ForKind("example.com/v1", "Widget")
	require.True(t, ok)
	assert.Same(t, v1, k)
	owner, ok := r.Owner("example.com", "Widget")
	require.True(t, ok)
	assert.Equal(t, "widgets.example.com", owner)
	assert.Len(t, r.Custom(), 2)
	all := r.All()
	assert.True(t, all[0].BuiltIn(), "built-in kinds first")
	assert.False(t, all[len(all)-1].BuiltIn())

	r.Remove("widgets.example.com")
	_, ok = r.Lookup("example.com", "v1", "widgets")
	assert.False(t, ok)
	assert.Empty(t, r.Custom())
}

func TestResolveNames(t *testing.T) {
	t.Parallel()
	r := kinds.New()
	v1 := widget("v1")
	r.Replace("widgets.example.com", []*kinds.Kind{v1}, v1)
	tests := []struct {
		name string
		want []cache.GroupResource
	}{
		{"Widget", []cache.GroupResource{v1.GroupResource()}},
		{"widgets", []cache.GroupResource{v1.GroupResource()}},
		{" WD ", []cache.GroupResource{v1.GroupResource()}},
		{"event", []cache.GroupResource{kinds.Events}},
		{"leases", []cache.GroupResource{kinds.Leases}},
		{"ns", []cache.GroupResource{kinds.Namespaces}},
		{"gizmo", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, r.Resolve(tt.name))
		})
	}
}

func TestFieldSet(t *testing.T) {
	t.Parallel()
	k := widget("v1")
	var obj map[string]any
	require.NoError(t, json.Unmarshal([]byte(`{"spec":{"color":"blue","size":3,"on":true}}`), &obj))
	assert.Equal(t, fields.Set{"spec.color": "blue", "size": "3"}, k.FieldSet(obj))
	assert.Equal(t, fields.Set{"spec.color": "", "size": ""}, k.FieldSet(map[string]any{"spec": "not an object"}))
	for _, label := range []string{"metadata.name", "metadata.namespace", "size"} {
		_, _, err := k.ConvertFieldLabel(label, "x")
		assert.NoError(t, err, label)
	}
	_, _, err := k.ConvertFieldLabel("spec.size", "x")
	assert.EqualError(t, err, "field label not supported: spec.size", "a field is selected by its name")
	ns, ok := kinds.New().Lookup("", "v1", "namespaces")
	require.True(t, ok)
	_, _, err = ns.ConvertFieldLabel("metadata.namespace", "x")
	assert.EqualError(t, err, "field label not supported: metadata.namespace", "a cluster-scoped kind with fields of its own")
	_, _, err = kinds.LeaseKind().ConvertFieldLabel("spec.holderIdentity", "x")
	assert.EqualError(t, err, `"spec.holderIdentity" is not a known field selector: only "metadata.name", "metadata.namespace"`)

	ev := kinds.EventKind()
	require.NoError(t, json.Unmarshal([]byte(`{"involvedObject":{"kind":"Application","name":"web"},"source":{"component":"c"},"count":2}`), &obj))
	set := ev.FieldSet(obj)
	assert.Equal(t, "Application", set["involvedObject.kind"])
	assert.Equal(t, "c", set["source"])
	assert.Equal(t, "2", set["count"])
}

// TestNewServesKindsInPlaceOfBuiltIns: a kind given to New is served instead of the built-in
// of its group, version and resource (the Event kind with its rules, from package events);
// views of it follow it.
func TestNewServesKindsInPlaceOfBuiltIns(t *testing.T) {
	t.Parallel()
	ev := kinds.EventKind()
	ev.TTL = time.Minute
	r := kinds.New(ev)
	got, ok := r.Lookup("", "v1", "events")
	require.True(t, ok)
	assert.Same(t, ev, got)
	stored, ok := r.Resource(kinds.Events)
	require.True(t, ok)
	assert.Same(t, ev, stored, "what the events.k8s.io view writes to")
	_, ok = r.Lookup("events.k8s.io", "v1", "events")
	assert.True(t, ok)
	assert.Len(t, r.All(), len(kinds.New().All()), "replaced, not added")
}

func TestNamespaceRules(t *testing.T) {
	t.Parallel()
	ns, ok := kinds.New().Lookup("", "v1", "namespaces")
	require.True(t, ok)
	assert.True(t, ns.Status)
	assert.True(t, ns.Finalize)

	obj := map[string]any{"metadata": map[string]any{"name": "team"}, "spec": map[string]any{"finalizers": []any{"example.com/x"}},
		"status": map[string]any{"phase": "Terminating"}}
	ns.PrepareForCreate(obj)
	assert.Equal(t, map[string]any{"finalizers": []any{"example.com/x", "kubernetes"}}, obj["spec"], "the kubernetes finalizer is added")
	assert.Equal(t, map[string]any{"phase": "Active"}, obj["status"], "a new namespace is Active, whatever was sent")
	ns.Canonicalize(obj)
	assert.Equal(t, "team", obj["metadata"].(map[string]any)["labels"].(map[string]any)["kubernetes.io/metadata.name"])

	next := map[string]any{"spec": map[string]any{"finalizers": []any{}}}
	ns.PrepareForUpdate(next, obj)
	assert.Equal(t, []any{"example.com/x", "kubernetes"}, next["spec"].(map[string]any)["finalizers"],
		"an update of the main resource keeps spec.finalizers")
}

func TestFieldDefault(t *testing.T) {
	t.Parallel()
	no, ok := kinds.New().Lookup("", "v1", "nodes")
	require.True(t, ok)
	assert.Equal(t, fields.Set{"spec.unschedulable": "false"}, no.FieldSet(map[string]any{"spec": map[string]any{}}), "false when omitted")
	assert.Equal(t, fields.Set{"spec.unschedulable": "true"}, no.FieldSet(map[string]any{"spec": map[string]any{"unschedulable": true}}))
}
