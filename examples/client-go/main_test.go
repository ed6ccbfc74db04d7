package main

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/opemu/opemu/application"
	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/crd"
	"github.com/opemu/opemu/kinds"
	"github.com/opemu/opemu/server"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// TestLabelsApplications runs the example controller against a real opemu server.
func TestLabelsApplications(t *testing.T) {
	served := kinds.New()
	store := cache.New(cache.Config{SelectableFields: served.FieldSet})
	defer store.Close()
	crds, err := crd.New(crd.Config{Kinds: served, Drop: store.DropResource})
	require.NoError(t, err)
	require.NoError(t, served.Add(crds.Kind()))
	require.NoError(t, crds.AddBuiltIn(application.CRD()))
	chain, err := application.NewChain(application.ChainConfig{})
	require.NoError(t, err)
	srv, err := server.New(server.Config{Store: store, Kinds: served, CRDs: crds, Admission: chain})
	require.NoError(t, err)
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	defer srv.BeginShutdown()

	cfg := &rest.Config{Host: hs.URL}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil))) }()

	client, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	apps := client.Resource(applications).Namespace("default")
	_, err = apps.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cloudnative.elide.dev/v1", "kind": "Application", "metadata": map[string]any{"name": "big"},
		"spec": map[string]any{"replicas": int64(8), "image": "nginx:1.27"},
	}}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		got, err := apps.Get(ctx, "big", metav1.GetOptions{})
		return err == nil && got.GetLabels()[SizeLabel] == "large"
	}, 10*time.Second, 20*time.Millisecond)
	cancel()
	require.NoError(t, <-done)
}
