package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/opemu/opemu/application"
	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/crd"
	"github.com/opemu/opemu/kinds"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// The write path without HTTP: these call Server.create and Server.update directly.

func newWriteServer(t testing.TB) (*Server, target) {
	t.Helper()
	served := kinds.New()
	store := cache.New(cache.Config{SelectableFields: served.FieldSet})
	t.Cleanup(store.Close)
	crds, err := crd.New(crd.Config{Kinds: served, Drop: store.DropResource})
	require.NoError(t, err)
	require.NoError(t, served.Add(crds.Kind()))
	require.NoError(t, crds.AddBuiltIn(application.CRD()))
	chain, err := application.NewChain(application.ChainConfig{AllowedRegistries: []string{"docker.io"}, BlockedImages: []string{"alpine"}})
	require.NoError(t, err)
	s, err := New(Config{Store: store, Kinds: served, CRDs: crds, Admission: chain})
	require.NoError(t, err)
	k, ok := served.Lookup("cloudnative.elide.dev", "v1", "applications")
	require.True(t, ok)
	return s, target{kind: k, key: cache.Key{Group: k.Group, Resource: k.Plural, Namespace: "default", Name: "web"}}
}

func jsonNumber(s string) json.Number { return json.Number(s) }

func appObj(replicas any, image string) map[string]any {
	return map[string]any{
		"apiVersion": "cloudnative.elide.dev/v1",
		"kind":       "Application",
		"metadata":   map[string]any{"name": "web"},
		"spec":       map[string]any{"replicas": replicas, "image": image, "extra": true},
		"status":     map[string]any{"phase": "Running"},
	}
}

func decode(t *testing.T, o *cache.Object) map[string]any {
	t.Helper()
	m, err := o.Decode()
	require.NoError(t, err)
	return m
}

func TestCreateRunsTheAdmissionOrder(t *testing.T) {
	t.Parallel()
	s, tg := newWriteServer(t)
	res, err := s.create(context.Background(), tg, appObj(json.Number("2"), "nginx:1.27"), writeOptions{fieldValidation: "Warn"})
	require.NoError(t, err)
	got := decode(t, res.obj)
	spec := got["spec"].(map[string]any)
	assert.NotContains(t, spec, "extra", "pruned")
	assert.Equal(t, "RollingUpdate", spec["strategy"], "defaulted")
	assert.Equal(t, "elide-operator", got["metadata"].(map[string]any)["labels"].(map[string]any)["app.kubernetes.io/managed-by"], "mutated")
	assert.NotContains(t, got, "status", "status is dropped on create")
	assert.Contains(t, res.warnings, `unknown field "spec.extra"`)
}

func TestCreateRejections(t *testing.T) {
	t.Parallel()
	s, tg := newWriteServer(t)
	tests := []struct {
		name string
		obj  map[string]any
		opts writeOptions
		code int32
	}{
		{"schema", appObj(json.Number("101"), "nginx:1"), writeOptions{}, http.StatusUnprocessableEntity},
		{"policy", appObj(json.Number("1"), "alpine:3"), writeOptions{}, http.StatusForbidden},
		{"strict", appObj(json.Number("1"), "nginx:1"), writeOptions{fieldValidation: "Strict"}, http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.create(context.Background(), tg, tt.obj, tt.opts)
			var st apierrors.APIStatus
			require.True(t, errors.As(err, &st), "err %v", err)
			assert.Equal(t, tt.code, st.Status().Code)
		})
	}
	_, err := s.cfg.Store.Get(context.Background(), tg.key)
	require.ErrorIs(t, err, cache.ErrNotFound, "a rejected write stores nothing")
}

// TestUpdateRetriesWhenAnotherWriteWins makes the first attempt lose a race: without a client
// resourceVersion the update is retried on the new state; with one, the conflict is returned.
func TestUpdateRetriesWhenAnotherWriteWins(t *testing.T) {
	t.Parallel()
	s, tg := newWriteServer(t)
	ctx := context.Background()
	_, err := s.create(ctx, tg, appObj(json.Number("1"), "nginx:1"), writeOptions{})
	require.NoError(t, err)

	n := 0
	race := func() {
		n++
		cur, err := s.cfg.Store.Get(ctx, tg.key)
		require.NoError(t, err)
		obj := decode(t, cur)
		obj["metadata"].(map[string]any)["labels"].(map[string]any)["raced"] = fmt.Sprint("yes-", n)
		_, err = s.cfg.Store.Update(ctx, tg.key, obj, cache.WriteOptions{})
		require.NoError(t, err)
	}
	attempts := 0
	res, err := s.update(ctx, tg, writeOptions{}, func(cur map[string]any) (map[string]any, bool, error) {
		attempts++
		if attempts == 1 {
			race()
		}
		cur["spec"].(map[string]any)["replicas"] = json.Number("3")
		return cur, false, nil
	})
	require.NoError(t, err)
	assert.Equal(t, 2, attempts)
	got := decode(t, res.obj)
	assert.Equal(t, json.Number("3"), got["spec"].(map[string]any)["replicas"])
	assert.Equal(t, "yes-1", got["metadata"].(map[string]any)["labels"].(map[string]any)["raced"], "the retry saw the other write")

	attempts = 0
	_, err = s.update(ctx, tg, writeOptions{}, func(cur map[string]any) (map[string]any, bool, error) {
		attempts++
		race()
		return cur, true, nil // pinned: the client's resourceVersion
	})
	require.ErrorIs(t, err, cache.ErrConflict)
	assert.Equal(t, 1, attempts, "a client precondition is not retried")
}
