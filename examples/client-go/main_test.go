package main

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/opemu/opemu/app/apptest"
	"github.com/opemu/opemu/server"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// TestLabelsApplications runs the example controller against a real opemu server.
func TestLabelsApplications(t *testing.T) {
	core := apptest.New(t, apptest.Options{})
	srv, err := server.New(server.Config{Registry: core.Registry, Kinds: core.Kinds, CRDs: core.CRDs, Admission: core.Admission})
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
