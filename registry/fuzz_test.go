package registry_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/registry"
	"github.com/opemu/opemu/registry/registrytest"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// FuzzPatch applies arbitrary patches of every type to a stored Application: the result is a
// Status error or a valid stored object, and a failed patch leaves the object untouched.
func FuzzPatch(f *testing.F) {
	env := registrytest.New(f, registrytest.Options{})
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

// requireClientError fails unless err is nil or a Status (or store) error with a 4xx code.
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
	if c := st.Status().Code; c < 400 || c >= 500 {
		t.Fatalf("rejection with code %d: %v", c, err)
	}
}
