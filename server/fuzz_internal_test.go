package server

import (
	"errors"
	"net/http"
	"net/url"
	"slices"
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
	_, tg := newFuzzServer(f)
	f.Add("limit=-1&continue=eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MSwic3RhcnQiOiJhXHUwMDAwIn0&resourceVersionMatch=Exact&resourceVersion=0")
	f.Add("labelSelector=tier%3D(web&fieldSelector=spec.x%3D1&watch=true&sendInitialEvents=true")
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		_, err = listQuery(q, tg)
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

// FuzzNegotiate: any Accept header picks a served media type and a kind of answer the endpoint
// gives, or is a 406.
func FuzzNegotiate(f *testing.F) {
	s, tg := newFuzzServer(f)
	cm, _ := s.cfg.Kinds.Lookup("", "v1", "configmaps")
	f.Add("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json", false)
	f.Add("application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1beta1, */*;q=0.1", true)
	f.Add("application/yaml;stream=watch", true)
	f.Fuzz(func(t *testing.T, accept string, stream bool) {
		r, err := http.NewRequest("GET", "/", nil)
		if err != nil {
			t.Fatal(err)
		}
		r.Header.Set("Accept", accept)
		for _, k := range []registry.Target{tg, {Kind: cm}} {
			out, err := negotiate(r, k.Kind, stream)
			if err != nil {
				var st apierrors.APIStatus
				if !errors.As(err, &st) || st.Status().Code != http.StatusNotAcceptable {
					t.Fatalf("not a 406: %v", err)
				}
				continue
			}
			if !slices.Contains(servedMediaTypes, out.mediaType) {
				t.Fatalf("media type %q is not served", out.mediaType)
			}
			switch {
			case out.as == "" && out.mediaType == protobufType && !k.Kind.Protobuf:
				t.Fatalf("protobuf of %s, which has none", k.Kind.Kind)
			case out.as == asTable && out.mediaType == protobufType:
				t.Fatal("a Table in protobuf")
			case stream && out.mediaType == yamlType:
				t.Fatal("a YAML stream")
			case out.as != "" && out.version != "v1" && out.version != "v1beta1":
				t.Fatalf("%s in version %q", out.as, out.version)
			}
		}
		if mt := negotiateStatus(r); !slices.Contains(servedMediaTypes, mt) {
			t.Fatalf("a Status in %q", mt)
		}
	})
}
