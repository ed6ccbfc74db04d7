package main

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/opemu/opemu/app/apptest"
	"github.com/opemu/opemu/server"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
)

// TestLabelsApplications runs the example controller against a real opemu server, which it
// finds through $KUBECONFIG as the README runs it.
func TestLabelsApplications(t *testing.T) {
	core := apptest.New(t, apptest.Options{})
	srv, err := server.New(server.Config{Registry: core.Registry, Kinds: core.Kinds, CRDs: core.CRDs, Admission: core.Admission})
	require.NoError(t, err)
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	defer srv.BeginShutdown()

	t.Setenv("KUBECONFIG", writeKubeconfig(t, hs.URL))
	cfg, err := restConfig("", "")
	require.NoError(t, err)
	require.Equal(t, hs.URL, cfg.Host)
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

// TestRestConfigAsKubectlFindsIt: the server comes from --kubeconfig, else $KUBECONFIG (else
// ~/.kube/config, clientcmd's default); --server overrides it; with no kubeconfig at all,
// opemu's default address.
func TestRestConfigAsKubectlFindsIt(t *testing.T) {
	host := func(kubeconfig, server string) string {
		t.Helper()
		cfg, err := restConfig(kubeconfig, server)
		require.NoError(t, err)
		return cfg.Host
	}
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none")) // and so not ~/.kube/config
	require.Equal(t, "http://127.0.0.1:3000", host("", ""), "no kubeconfig anywhere")
	require.Equal(t, "http://127.0.0.1:4000", host("", "http://127.0.0.1:4000"))

	t.Setenv("KUBECONFIG", writeKubeconfig(t, "http://127.0.0.1:3102"))
	require.Equal(t, "http://127.0.0.1:3102", host("", ""), "$KUBECONFIG")
	require.Equal(t, "http://127.0.0.1:3103", host(writeKubeconfig(t, "http://127.0.0.1:3103"), ""), "--kubeconfig first")
	require.Equal(t, "http://127.0.0.1:4000", host("", "http://127.0.0.1:4000"), "--server overrides the kubeconfig's")
}

// writeKubeconfig writes a kubeconfig whose current context is server, as opemu kubeconfig
// writes one, and returns its path.
func writeKubeconfig(t *testing.T, server string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(path, []byte(`apiVersion: v1
kind: Config
clusters:
- name: opemu
  cluster: {server: "`+server+`", insecure-skip-tls-verify: true}
users:
- name: opemu
  user: {}
contexts:
- name: opemu
  context: {cluster: opemu, user: opemu}
current-context: opemu
`), 0o600))
	return path
}
