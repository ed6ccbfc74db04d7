package server

import (
	"errors"
	"net/http"
	"net/url"
	"testing"

	"github.com/opemu/opemu/app/apptest"
	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/registry"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Fuzz targets for the parsers reachable from HTTP. None may panic; every rejection is a
// Status with a 4xx code.

func requireClientError(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		var cerr *cache.Error
		if errors.As(err, &cerr) {
			return // mapped to a Status in errors.go
		}
		t.Fatalf("not a Status error: %T %v", err, err)
	}
	if c := st.Status().Code; c < 400 || c >= 500 {
		t.Fatalf("rejection with code %d: %v", c, err)
	}
}

// newFuzzServer is a server over the standard core, with the Application target.
func newFuzzServer(t testing.TB) (*Server, registry.Target) {
	t.Helper()
	env := apptest.New(t, apptest.Options{})
	s, err := New(Config{Registry: env.Registry, Kinds: env.Kinds, CRDs: env.CRDs, Admission: env.Admission})
	if err != nil {
		t.Fatal(err)
	}
	k, _ := env.Kinds.Lookup("cloudnative.elide.dev", "v1", "applications")
	return s, registry.Target{Kind: k, Key: cache.Key{Group: k.Group, Resource: k.Plural, Namespace: "default", Name: "web"}}
}

func FuzzDecodeObject(f *testing.F) {
	s, tg := newFuzzServer(f)
	ns, _ := s.cfg.Kinds.Lookup("", "v1", "namespaces")
	f.Fuzz(func(t *testing.T, contentType string, body []byte) {
		for _, target := range []registry.Target{tg, {Kind: ns}} {
			o := registry.Options{FieldValidation: "Strict"}
			obj, _, err := s.decodeObject(target, contentType, body, &o)
			requireClientError(t, err)
			if err == nil && obj == nil {
				t.Fatal("no object and no error")
			}
		}
	})
}

func FuzzListQuery(f *testing.F) {
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		_, err = parseListQuery(q, func(l string) bool { return l != "spec.x" })
		requireClientError(t, err)
	})
}

func FuzzSSEQuery(f *testing.F) {
	s, _ := newFuzzServer(f)
	f.Fuzz(func(t *testing.T, query, lastEventID string) {
		r, err := http.NewRequest("GET", "/watch?"+query, nil)
		if err != nil {
			return
		}
		r.Header.Set("Last-Event-ID", lastEventID)
		_, err = s.parseSSE(r)
		requireClientError(t, err)
	})
}
