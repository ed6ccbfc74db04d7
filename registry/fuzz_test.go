package registry_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/opemu/opemu/app/apptest"
	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/registry"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// FuzzPatch applies arbitrary patches of every type to a stored Application: the result is a
// Status error or a valid stored object, and a failed patch leaves the object untouched.
func FuzzPatch(f *testing.F) {
	env := apptest.New(f, apptest.Options{})
	tg := appTarget(f, env)
	if _, err := env.Registry.Create(ctx, tg, appObj(json.Number("1"), "nginx:1"), registry.Options{}); err != nil {
		f.Fatal(err)
	}
	tg.Key.Name = "web"
	f.Fuzz(func(t *testing.T, patchType string, body []byte) {
		before, err := env.Storage.Get(ctx, tg.Key)
		if err != nil {
			t.Fatal(err)
		}
		_, err = env.Registry.Patch(ctx, tg, patchType, body, registry.Options{FieldValidation: "Strict", FieldManager: "fuzz"})
		requireClientError(t, err)
		after, getErr := env.Storage.Get(ctx, tg.Key)
		if getErr != nil {
			t.Fatalf("the object is gone after a patch: %v", getErr)
		}
		if err != nil && after != before {
			t.Fatal("a rejected patch changed the stored object")
		}
		obj, err := after.Decode()
		if err != nil {
			t.Fatal(err)
		}
		if errs := tg.Kind.Schema.Validate(obj); len(errs) > 0 {
			t.Fatalf("an invalid object was stored: %v", errs)
		}
	})
}

// requireClientError fails unless err is nil or a Status (or store) error with a 4xx code, or
// one of the 500s kube-apiserver itself answers (serverError: no reason).
func requireClientError(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		var cerr *cache.Error
		if errors.As(err, &cerr) {
			return // mapped to a Status by the server
		}
		t.Fatalf("not a Status error: %T %v", err, err)
	}
	if c := st.Status().Code; c == 500 && st.Status().Reason == "" {
		// kube-apiserver's own 500s, answered as it answers them (no reason): an applied
		// configuration with fields a custom resource's schema does not declare, say.
		return
	}
	if c := st.Status().Code; c < 400 || c >= 500 {
		t.Fatalf("rejection with code %d: %v", c, err)
	}
}

// FuzzBuiltinPatch applies arbitrary patches of every type to objects of kinds served from Go
// types (a Deployment, a Service) and through a view (an events.k8s.io/v1 Event, stored as a
// v1 Event): the result is a Status error or an object that passes its kind's schema, and a
// failed patch leaves the stored object untouched.
func FuzzBuiltinPatch(f *testing.F) {
	env := apptest.New(f, apptest.Options{})
	type target struct {
		t    registry.Target
		body string
	}
	lookup := func(group, plural, body string) target {
		k, ok := env.Kinds.Lookup(group, "v1", plural)
		if !ok {
			f.Fatalf("%s %s is not served", group, plural)
		}
		obj, err := registry.DecodeObject([]byte(body))
		if err != nil {
			f.Fatal(err)
		}
		tg := registry.Target{Kind: k, Key: cache.Key{Group: k.GroupResource().Group, Resource: k.GroupResource().Resource, Namespace: "default"}}
		name, _ := obj["metadata"].(map[string]any)["name"].(string)
		if _, err := env.Registry.Create(ctx, tg, obj, registry.Options{}); err != nil {
			f.Fatal(err)
		}
		tg.Key.Name = name
		return target{tg, body}
	}
	targets := []target{
		lookup("apps", "deployments", `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},"spec":{"selector":{"matchLabels":{"app":"web"}},
			"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"web","image":"nginx:1.27","ports":[{"containerPort":80}]}]}}}}`),
		lookup("", "services", `{"apiVersion":"v1","kind":"Service","metadata":{"name":"web"},"spec":{"selector":{"app":"web"},"ports":[{"name":"http","port":80}]}}`),
		lookup("events.k8s.io", "events", `{"apiVersion":"events.k8s.io/v1","kind":"Event","metadata":{"name":"web.1"},"eventTime":"2026-11-24T10:00:00.000000Z",
			"reportingController":"c","reportingInstance":"c-1","action":"Scale","reason":"Scaled","note":"n","type":"Normal","regarding":{"kind":"Deployment","name":"web"}}`),
	}
	for i, p := range []struct{ typ, body string }{
		{"application/strategic-merge-patch+json", `{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"nginx:1.28"}]}}}}`},
		{"application/merge-patch+json", `{"spec":{"replicas":"3"}}`},
		{"application/json-patch+json", `[{"op":"replace","path":"/spec/ports/0/port","value":-1}]`},
		{"application/apply-patch+yaml", `{"apiVersion":"v1","kind":"Service","metadata":{"name":"web"},"spec":{"ports":[{"name":"http","port":81}]}}`},
		{"application/strategic-merge-patch+json", `{"series":{"count":2,"lastObservedTime":"2026-11-24T10:00:01.000000Z"}}`},
		{"application/merge-patch+json", `{"eventTime":null,"note":5}`},
	} {
		f.Add(uint8(i%len(targets)), p.typ, []byte(p.body))
	}
	f.Fuzz(func(t *testing.T, which uint8, patchType string, body []byte) {
		tg := targets[int(which)%len(targets)].t
		before, err := env.Storage.Get(ctx, tg.Key)
		if err != nil {
			t.Fatal(err)
		}
		_, err = env.Registry.Patch(ctx, tg, patchType, body, registry.Options{FieldValidation: "Strict", FieldManager: "fuzz"})
		requireClientError(t, err)
		after, getErr := env.Storage.Get(ctx, tg.Key)
		if getErr != nil {
			t.Fatalf("the object is gone after a patch: %v", getErr)
		}
		if err != nil && after != before {
			t.Fatal("a rejected patch changed the stored object")
		}
		obj, err := after.Decode()
		if err != nil {
			t.Fatal(err)
		}
		if conv := tg.Kind.Conversion; conv != nil {
			if obj, err = conv.FromStorage(obj); err != nil {
				t.Fatalf("a stored object does not convert: %v", err)
			}
		}
		if errs := tg.Kind.Schema.Validate(obj); len(errs) > 0 {
			t.Fatalf("an invalid object was stored: %v", errs)
		}
	})
}
