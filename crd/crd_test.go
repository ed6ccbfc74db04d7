package crd_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/opemu/opemu/application"
	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/crd"
	"github.com/opemu/opemu/kinds"
	"github.com/opemu/opemu/registry/registrytest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

func decode(t testing.TB, s string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var m map[string]any
	require.NoError(t, dec.Decode(&m))
	return m
}

// newRegistry returns a CRD registry holding the built-in Application CRD, serving into ks.
func newRegistry(t testing.TB) (*crd.Registry, *kinds.Registry) {
	t.Helper()
	ks := kinds.New()
	r, err := crd.New(crd.Config{Kinds: ks})
	require.NoError(t, err)
	require.NoError(t, r.AddBuiltIn(application.CRD()))
	return r, ks
}

func applicationKind(t testing.TB) *kinds.Kind {
	t.Helper()
	_, ks := newRegistry(t)
	k, ok := ks.Lookup("cloudnative.elide.dev", "v1", "applications")
	require.True(t, ok)
	return k
}

func TestBuiltInApplication(t *testing.T) {
	t.Parallel()
	r, ks := newRegistry(t)
	k, ok := ks.Lookup("cloudnative.elide.dev", "v1", "applications")
	require.True(t, ok)
	assert.Equal(t, "Application", k.Kind)
	assert.Equal(t, "ApplicationList", k.ListKind)
	assert.Equal(t, "application", k.Singular)
	assert.Equal(t, []string{"app", "apps"}, k.ShortNames)
	assert.Equal(t, []string{"all"}, k.Categories)
	assert.True(t, k.Namespaced)
	assert.True(t, k.Status)
	require.NotNil(t, k.Scale)
	assert.Equal(t, ".spec.replicas", k.Scale.SpecReplicasPath)
	var cols []string
	for _, c := range k.Columns[1:] {
		cols = append(cols, c.Def.Name)
	}
	assert.Equal(t, []string{"Replicas", "Ready", "Phase", "Age"}, cols)
	assert.Equal(t, "cloudnative.elide.dev/v1", k.GroupVersion())

	c, ok := r.CRD(application.CRDName)
	require.True(t, ok)
	assert.Equal(t, "CustomResourceDefinition", c.Kind)
	assert.Equal(t, "apiextensions.k8s.io/v1", c.APIVersion)
	conds := map[apiextv1.CustomResourceDefinitionConditionType]apiextv1.ConditionStatus{}
	for _, cond := range c.Status.Conditions {
		conds[cond.Type] = cond.Status
	}
	assert.Equal(t, apiextv1.ConditionTrue, conds[apiextv1.Established])
	assert.Equal(t, apiextv1.ConditionTrue, conds[apiextv1.NamesAccepted])

	require.ErrorIs(t, r.Unregister(application.CRDName), crd.ErrBuiltIn)
	_, _, err := r.Register(application.CRD())
	require.ErrorIs(t, err, crd.ErrBuiltIn)
}

func TestValidate(t *testing.T) {
	t.Parallel()
	k := applicationKind(t).Schema
	tests := []struct {
		name string
		obj  string
		want []string // "field|reason"
	}{
		{"valid", `{"spec":{"replicas":3,"image":"nginx"}}`, nil},
		{"replicas over the maximum", `{"spec":{"replicas":150,"image":"nginx"}}`, []string{"spec.replicas|FieldValueInvalid"}},
		{"negative replicas", `{"spec":{"replicas":-1,"image":"nginx"}}`, []string{"spec.replicas|FieldValueInvalid", ".spec.replicas|FieldValueInvalid"}},                                   // and the scale path's check
		{"fractional replicas", `{"spec":{"replicas":2.5,"image":"nginx"}}`, []string{"<nil>|FieldValueInvalid", "spec.replicas|FieldValueTypeInvalid", ".spec.replicas|FieldValueInvalid"}}, // the format's check has no field, in kube-apiserver too
		{"string replicas", `{"spec":{"replicas":"3","image":"nginx"}}`, []string{"spec.replicas|FieldValueTypeInvalid", ".spec.replicas|FieldValueInvalid"}},
		{"missing image", `{"spec":{"replicas":3}}`, []string{"spec.image|FieldValueRequired"}},
		{"empty image", `{"spec":{"replicas":3,"image":""}}`, []string{"spec.image|FieldValueInvalid"}},
		{"bad strategy", `{"spec":{"replicas":3,"image":"x","strategy":"Foo"}}`, []string{"spec.strategy|FieldValueNotSupported"}},
		{"config values are strings", `{"spec":{"replicas":3,"image":"x","config":{"a":1}}}`, []string{"spec.config.a|FieldValueTypeInvalid"}},
		{"spec null", `{"spec":null}`, []string{"spec|FieldValueTypeInvalid"}},
		{"spec missing", `{}`, []string{"spec|FieldValueRequired"}},
		{"spec an array", `{"spec":[1]}`, []string{"spec|FieldValueTypeInvalid", ".spec.replicas|FieldValueInvalid"}},
		{"bad phase", `{"spec":{"replicas":1,"image":"x"},"status":{"phase":"Sleeping"}}`, []string{"status.phase|FieldValueNotSupported"}},
		{"condition without status", `{"spec":{"replicas":1,"image":"x"},"status":{"conditions":[{"type":"Ready"}]}}`, []string{"status.conditions[0].status|FieldValueRequired"}},
		{"two errors", `{"spec":{"replicas":101,"image":""}}`, []string{"spec.image|FieldValueInvalid", "spec.replicas|FieldValueInvalid"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			errs := k.Validate(decode(t, tt.obj))
			var got []string
			for _, e := range errs {
				got = append(got, e.Field+"|"+reason(e))
			}
			assert.Equal(t, tt.want, got, "errors: %v", errs)
		})
	}
}

// reason is the Status cause reason Kubernetes gives a field error type.
func reason(e *field.Error) string {
	switch e.Type {
	case field.ErrorTypeRequired:
		return "FieldValueRequired"
	case field.ErrorTypeInvalid:
		return "FieldValueInvalid"
	case field.ErrorTypeTypeInvalid:
		return "FieldValueTypeInvalid"
	case field.ErrorTypeNotSupported:
		return "FieldValueNotSupported"
	}
	return string(e.Type)
}

func TestValidateMessages(t *testing.T) {
	t.Parallel()
	k := applicationKind(t).Schema
	errs := k.Validate(decode(t, `{"spec":{"replicas":150,"image":"nginx"}}`))
	require.Len(t, errs, 1)
	assert.Equal(t, "spec.replicas: Invalid value: 150: spec.replicas in body should be less than or equal to 100", errs[0].Error())
}

func TestPrune(t *testing.T) {
	t.Parallel()
	k := applicationKind(t).Schema
	obj := decode(t, `{"apiVersion":"cloudnative.elide.dev/v1","kind":"Application","metadata":{"name":"x","whatever":1},
		"top":1,"spec":{"replicas":1,"image":"x","foo":true,"config":{"any":"kept"},"resources":{"limits":{"cpu":"1","gpu":"2"}}},
		"status":{"conditions":[{"type":"Ready","status":"True","extra":1}]}}`)
	unknown := k.Prune(obj)
	assert.Equal(t, []string{"spec.foo", "spec.resources.limits.gpu", "status.conditions[0].extra", "top"}, unknown)
	assert.Equal(t, map[string]any{"any": "kept"}, obj["spec"].(map[string]any)["config"], "maps keep their keys")
	assert.Contains(t, obj["metadata"], "whatever", "metadata is not pruned by the schema")
	assert.NotContains(t, obj, "top")
}

func TestDefault(t *testing.T) {
	t.Parallel()
	k := applicationKind(t).Schema
	obj := decode(t, `{"spec":{"replicas":1,"image":"x"}}`)
	k.Default(obj)
	assert.Equal(t, "RollingUpdate", obj["spec"].(map[string]any)["strategy"])
	obj = decode(t, `{"spec":{"replicas":1,"image":"x","strategy":"Recreate"}}`)
	k.Default(obj)
	assert.Equal(t, "Recreate", obj["spec"].(map[string]any)["strategy"], "a value is never overwritten")
}

const widgetsYAML = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Cluster
  names: {kind: Widget, plural: widgets}
  versions:
  - name: v1beta1
    served: true
    storage: false
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer, default: 1}
              free: {type: object, x-kubernetes-preserve-unknown-fields: true}
              port: {x-kubernetes-int-or-string: true, anyOf: [{type: integer}, {type: string}]}
              note: {type: string, nullable: true}
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer, minimum: 1, default: 3}
`

func widgets(t testing.TB) *apiextv1.CustomResourceDefinition {
	t.Helper()
	var c apiextv1.CustomResourceDefinition
	require.NoError(t, yaml.Unmarshal([]byte(widgetsYAML), &c))
	return &c
}

func TestRegisterAndUnregister(t *testing.T) {
	t.Parallel()
	r, ks := newRegistry(t)
	gen := ks.Generation()
	stored, errs, err := r.Register(widgets(t))
	require.NoError(t, err)
	require.Empty(t, errs)
	assert.Equal(t, "widget", stored.Spec.Names.Singular)
	assert.Equal(t, "WidgetList", stored.Spec.Names.ListKind)
	assert.Greater(t, ks.Generation(), gen)

	beta, ok := ks.Lookup("example.com", "v1beta1", "widgets")
	require.True(t, ok)
	v1, ok := ks.Lookup("example.com", "v1", "widgets")
	require.True(t, ok)
	assert.False(t, v1.Namespaced)
	assert.Equal(t, "v1", beta.StorageVersion)
	storage, ok := ks.Resource(cache.GroupResource{Group: "example.com", Resource: "widgets"})
	require.True(t, ok)
	assert.Equal(t, "v1", storage.Version)
	assert.Equal(t, "Age", v1.Columns[1].Def.Name, "a CRD without columns gets Age")
	assert.Len(t, ks.Custom(), 3)
	assert.Len(t, r.CRDs(), 2)

	// Each version has its own schema and defaults.
	obj := decode(t, `{"spec":{"free":{"x":{"y":1}},"port":"http","note":null,"gone":1}}`)
	assert.Equal(t, []string{"spec.gone"}, beta.Schema.Prune(obj))
	beta.Schema.Default(obj)
	assert.Equal(t, json.Number("1"), obj["spec"].(map[string]any)["size"])
	assert.Empty(t, beta.Schema.Validate(obj), "int-or-string, nullable and preserved fields validate")
	obj = decode(t, `{"spec":{}}`)
	v1.Schema.Default(obj)
	assert.Equal(t, json.Number("3"), obj["spec"].(map[string]any)["size"])
	assert.NotEmpty(t, v1.Schema.Validate(decode(t, `{"spec":{"size":0}}`)))

	// v1beta1 is a view of the objects stored as v1 (strategy None): reads rewrite apiVersion
	// and prune and default with v1beta1's schema, writes rewrite it back and prune with v1's.
	require.NotNil(t, beta.Conversion)
	assert.Nil(t, v1.Conversion, "the storage version is no view")
	assert.Equal(t, cache.GroupResource{Group: "example.com", Resource: "widgets"}, beta.Conversion.Storage)
	read, err := beta.Conversion.FromStorage(decode(t, `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":5,"gone":1}}`))
	require.NoError(t, err)
	assert.Equal(t, "example.com/v1beta1", read["apiVersion"])
	assert.Equal(t, map[string]any{"size": json.Number("5")}, read["spec"])
	written, err := beta.Conversion.ToStorage(decode(t, `{"apiVersion":"example.com/v1beta1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":5,"port":"http"}}`), nil)
	require.NoError(t, err)
	assert.Equal(t, "example.com/v1", written["apiVersion"])
	assert.Equal(t, map[string]any{"size": json.Number("5")}, written["spec"], "v1's schema has no port")

	require.NoError(t, r.Unregister("widgets.example.com"))
	_, ok = ks.Lookup("example.com", "v1", "widgets")
	assert.False(t, ok)
	require.ErrorIs(t, r.Unregister("widgets.example.com"), crd.ErrNotFound)
}

func TestDeprecatedVersions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		warning *string
		want    string
	}{
		{"kube-apiserver's words", nil, "example.com/v1beta1 Widget is deprecated"},
		{"the CRD's", ptr("use example.com/v1"), "use example.com/v1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, ks := newRegistry(t)
			c := widgets(t)
			c.Spec.Versions[0].Deprecated, c.Spec.Versions[0].DeprecationWarning = true, tt.warning
			_, errs, err := r.Register(c)
			require.NoError(t, err)
			require.Empty(t, errs)
			beta, _ := ks.Lookup("example.com", "v1beta1", "widgets")
			v1, _ := ks.Lookup("example.com", "v1", "widgets")
			assert.Equal(t, tt.want, beta.Warning)
			assert.Empty(t, v1.Warning)
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestRegisterRejectsInvalid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		mutate func(*apiextv1.CustomResourceDefinition)
		field  string
	}{
		{"wrong name", func(c *apiextv1.CustomResourceDefinition) { c.Name = "gadgets.example.com" }, "metadata.name"},
		{"no plural", func(c *apiextv1.CustomResourceDefinition) { c.Spec.Names.Plural = "" }, "spec.names.plural"},
		{"no kind", func(c *apiextv1.CustomResourceDefinition) { c.Spec.Names.Kind = "" }, "spec.names.kind"},
		{"group without a dot", func(c *apiextv1.CustomResourceDefinition) { c.Spec.Group = "example"; c.Name = "widgets.example" }, "spec.group"},
		{"two storage versions", func(c *apiextv1.CustomResourceDefinition) { c.Spec.Versions[0].Storage = true }, "spec.versions"},
		{"no schema", func(c *apiextv1.CustomResourceDefinition) { c.Spec.Versions[1].Schema = nil }, "spec.versions[1].schema.openAPIV3Schema"},
		{"bad scope", func(c *apiextv1.CustomResourceDefinition) { c.Spec.Scope = "Galaxy" }, "spec.scope"},
		{"kind of the built-in", func(c *apiextv1.CustomResourceDefinition) {
			c.Spec.Group, c.Name, c.Spec.Names.Kind = "cloudnative.elide.dev", "widgets.cloudnative.elide.dev", "Application"
		}, "spec.names.kind"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, _ := newRegistry(t)
			c := widgets(t)
			tt.mutate(c)
			_, errs, err := r.Register(c)
			require.NoError(t, err)
			require.NotEmpty(t, errs)
			var fields []string
			for _, e := range errs {
				fields = append(fields, e.Field)
			}
			assert.Contains(t, fields, tt.field)
			assert.Len(t, r.CRDs(), 1, "nothing registered")
		})
	}
}

// FuzzValidate feeds arbitrary JSON through Prune, Default and Validate: none may panic, and
// after pruning nothing unknown is left.
func FuzzValidate(f *testing.F) {
	k := applicationKind(f).Schema
	f.Fuzz(func(t *testing.T, s string) {
		dec := json.NewDecoder(strings.NewReader(s))
		dec.UseNumber()
		var obj map[string]any
		if dec.Decode(&obj) != nil || obj == nil {
			return
		}
		k.Prune(obj)
		if again := k.Prune(obj); len(again) != 0 {
			t.Fatalf("pruning twice removed %v", again)
		}
		k.Default(obj)
		for _, e := range k.Validate(obj) {
			if e.Field == "" {
				t.Fatalf("field error without a path: %v", e)
			}
		}
	})
}

// TestDeleteCRD: a deleted CRD is marked, its custom resources deleted through the write path
// (a finalizer holds one back, and the CRD with it), new ones refused; the last one's removal
// removes the CRD and its kinds.
func TestDeleteCRD(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := registrytest.New(t, registrytest.Options{})
	c := env.Registry.Client("test")
	crdKey := cache.Key{Group: crd.Resource.Group, Resource: crd.Resource.Resource, Name: "widgets.example.com"}
	var def map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(widgetsYAML), &def))
	_, err := c.Create(ctx, crdKey, def)
	require.NoError(t, err)
	widget := func(name string) cache.Key { return cache.Key{Group: "example.com", Resource: "widgets", Name: name} }
	_, err = c.Create(ctx, widget("held"), map[string]any{"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"finalizers": []any{"example.com/hold"}}, "spec": map[string]any{}})
	require.NoError(t, err)
	_, err = c.Create(ctx, widget("free"), map[string]any{"apiVersion": "example.com/v1", "kind": "Widget", "spec": map[string]any{}})
	require.NoError(t, err)

	marked, removed, err := c.Delete(ctx, crdKey, cache.Preconditions{})
	require.NoError(t, err)
	assert.False(t, removed)
	assert.Equal(t, []string{"customresourcecleanup.apiextensions.k8s.io"}, marked.Finalizers())
	assert.True(t, marked.Deleting())

	_, err = c.Get(ctx, widget("free"))
	require.ErrorIs(t, err, cache.ErrNotFound, "a custom resource without finalizers is deleted")
	held, err := c.Get(ctx, widget("held"))
	require.NoError(t, err)
	assert.True(t, held.Deleting(), "a custom resource with a finalizer is marked")
	stored, err := c.Get(ctx, crdKey)
	require.NoError(t, err, "the CRD waits for its last custom resource")
	var got apiextv1.CustomResourceDefinition
	require.NoError(t, json.Unmarshal(stored.Raw(), &got))
	cond := terminating(got)
	require.NotNil(t, cond)
	assert.Equal(t, "InstanceDeletionInProgress", cond.Reason)
	_, ok := env.Kinds.Lookup("example.com", "v1", "widgets")
	assert.True(t, ok, "its kinds are served while it terminates")

	_, err = c.Create(ctx, widget("late"), map[string]any{"apiVersion": "example.com/v1", "kind": "Widget", "spec": map[string]any{}})
	require.True(t, apierrors.IsForbidden(err), "creates are refused while it terminates: %v", err)
	assert.Contains(t, err.Error(), "create not allowed while custom resource definition is terminating")

	obj, err := held.Decode()
	require.NoError(t, err)
	obj["metadata"].(map[string]any)["finalizers"] = []any{}
	_, err = c.Update(ctx, widget("held"), obj)
	require.NoError(t, err)
	_, err = c.Get(ctx, crdKey)
	require.ErrorIs(t, err, cache.ErrNotFound, "the last custom resource's removal removes the CRD")
	_, ok = env.Kinds.Lookup("example.com", "v1", "widgets")
	assert.False(t, ok)
}

func terminating(c apiextv1.CustomResourceDefinition) *apiextv1.CustomResourceDefinitionCondition {
	for i, cond := range c.Status.Conditions {
		if cond.Type == apiextv1.Terminating {
			return &c.Status.Conditions[i]
		}
	}
	return nil
}

// TestBounds: Check refuses a new CRD beyond MaxCRDs or MaxCRDBytes (the built-in ones not
// counted) with kube-apiserver's 403 for a create beyond a quota, and still replaces a served
// one at the bound.
func TestBounds(t *testing.T) {
	t.Parallel()
	named := func(group string) *apiextv1.CustomResourceDefinition {
		c := widgets(t)
		c.Spec.Group, c.Name = group, "widgets."+group
		return c
	}
	for _, tt := range []struct {
		name  string
		cfg   crd.Config
		bound string
	}{
		{"count", crd.Config{MaxCRDs: 2}, "MAX_CRDS"},
		{"size", crd.Config{MaxCRDBytes: 2*widgetsBytes(t) + widgetsBytes(t)/2}, "MAX_CRD_BYTES"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			cfg.Kinds = kinds.New()
			r, err := crd.New(cfg)
			require.NoError(t, err)
			require.NoError(t, r.AddBuiltIn(application.CRD()))
			for _, g := range []string{"a.example.com", "b.example.com"} {
				_, _, errs, err := r.Check(named(g), nil)
				require.NoError(t, err)
				require.Empty(t, errs)
				_, errs, err = r.Register(named(g))
				require.NoError(t, err)
				require.Empty(t, errs)
			}
			_, _, _, err = r.Check(named("c.example.com"), nil)
			require.True(t, apierrors.IsForbidden(err), "%v", err)
			assert.Contains(t, err.Error(), `customresourcedefinitions.apiextensions.k8s.io "widgets.c.example.com" is forbidden: exceeded the server's bound`)
			assert.Contains(t, err.Error(), tt.bound)

			old, ok := r.CRD("widgets.b.example.com")
			require.True(t, ok)
			old.ResourceVersion = "1"
			next := old.DeepCopy()
			next.Labels = map[string]string{"a": "b"}
			_, _, errs, err := r.Check(next, old)
			require.NoError(t, err, "a served CRD is replaced at the bound")
			require.Empty(t, errs)
		})
	}
}

// widgetsBytes is the size of the widgets CRD as JSON.
func widgetsBytes(t *testing.T) int64 {
	raw, err := json.Marshal(widgets(t))
	require.NoError(t, err)
	return int64(len(raw))
}

// TestConversionWebhook: a CRD converted by a webhook reads and writes its other versions
// through it (apiextensions-apiserver's webhook converter, over HTTPS with the caBundle).
func TestConversionWebhook(t *testing.T) {
	t.Parallel()
	beta := convertedWidgets(t)
	read, err := beta.Conversion.FromStorage(decode(t, `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":5}}`))
	require.NoError(t, err)
	assert.Equal(t, "example.com/v1beta1", read["apiVersion"])
	assert.Equal(t, map[string]any{"size": json.Number("5")}, read["spec"])
	written, err := beta.Conversion.ToStorage(decode(t, `{"apiVersion":"example.com/v1beta1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":2}}`), nil)
	require.NoError(t, err)
	assert.Equal(t, "example.com/v1", written["apiVersion"])
}
