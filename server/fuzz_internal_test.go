package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"testing"

	"github.com/opemu/opemu/cache"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

func FuzzDecodeObject(f *testing.F) {
	s, tg := newWriteServer(f)
	ns, _ := s.cfg.Kinds.Lookup("", "v1", "namespaces")
	f.Fuzz(func(t *testing.T, contentType string, body []byte) {
		for _, target := range []target{tg, {kind: ns}} {
			obj, _, err := s.decodeObject(target, contentType, body, "Strict")
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
	s, _ := newWriteServer(f)
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

// FuzzPatch applies arbitrary patches of every type to a stored Application: the result is a
// Status error or a valid stored object, and a failed patch leaves the object untouched.
func FuzzPatch(f *testing.F) {
	s, tg := newWriteServer(f)
	ctx := context.Background()
	if _, err := s.create(ctx, tg, appObj(jsonNumber("1"), "nginx:1"), writeOptions{}); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, patchType string, body []byte) {
		before, err := s.cfg.Store.Get(ctx, tg.key)
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = s.patch(ctx, tg, patchType, body, writeOptions{fieldValidation: "Strict", fieldManager: "fuzz"})
		requireClientError(t, err)
		after, getErr := s.cfg.Store.Get(ctx, tg.key)
		if getErr != nil {
			t.Fatalf("the object is gone after a patch: %v", getErr)
		}
		if err != nil && after != before {
			t.Fatal("a rejected patch changed the stored object")
		}
		if errs := tg.kind.Schema.Validate(mustDecode(t, after)); len(errs) > 0 {
			t.Fatalf("an invalid object was stored: %v", errs)
		}
	})
}

func mustDecode(t *testing.T, o *cache.Object) map[string]any {
	t.Helper()
	m, err := o.Decode()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// FuzzObjectMeta: whenever metadata is read directly, the result is what the JSON round trip
// into ObjectMeta gives.
func FuzzObjectMeta(f *testing.F) {
	f.Fuzz(func(t *testing.T, raw []byte) {
		md, err := decodeJSONObject(raw)
		if err != nil {
			return
		}
		direct, ok := simpleObjectMeta(md)
		if !ok {
			return
		}
		b, err := json.Marshal(md)
		require.NoError(t, err)
		var viaJSON metav1.ObjectMeta
		require.NoError(t, json.Unmarshal(b, &viaJSON), "read directly, but the round trip fails: %s", b)
		require.Equal(t, viaJSON, direct, "metadata %s", b)
	})
}
