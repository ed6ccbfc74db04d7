package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/opemu/opemu/test/internal/kubectl"
	"github.com/opemu/opemu/test/internal/request"
)

// TLS=self-signed as the binary sets it up from its environment: the CA it makes in TLS_DIR
// and keeps across a restart, the kubeconfig `opemu kubeconfig` writes with it, and the clients
// that trust it. (Tokens, the request guard and the reviews are tested in process, in
// test/integration.)

var appsGVR = schema.GroupVersionResource{Group: "cloudnative.elide.dev", Version: "v1", Resource: "applications"}

// app is the Application name with replicas of nginx:1.27.
func app(name string, replicas int64) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cloudnative.elide.dev/v1", "kind": "Application",
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"replicas": replicas, "image": "nginx:1.27"},
	}}
}

var caDataRE = regexp.MustCompile(`certificate-authority-data: (\S+)`)

// TestSelfSignedTLS: with TLS=self-signed, kubectl and client-go connect with the CA the
// kubeconfig embeds (no insecure-skip-tls-verify); a restart reuses the CA.
func TestSelfSignedTLS(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "tls")
	env := []string{"TLS=self-signed", "TLS_DIR=" + dir, "TOKEN=s3cret-token", "ENABLE_LEADER_ELECTION=false", "ROLLOUT_STEP=0"}
	p := start(t, env...)
	base := "https://" + p.addr
	caPEM, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	require.NoError(t, err)

	kc := kubeconfigFor(t, append(env, "ADDR="+p.addr))
	assert.Contains(t, string(kc), "server: "+base)
	assert.NotContains(t, string(kc), "insecure-skip-tls-verify: true")
	assert.Contains(t, string(kc), `token: "s3cret-token"`)
	m := caDataRE.FindSubmatch(kc)
	require.NotNil(t, m, "the kubeconfig embeds the CA:\n%s", kc)

	k := kubectl.New(t, kc)
	assert.Contains(t, k.Run("version"), "Server Version: v1.37")
	assert.Contains(t, k.Run("apply", "-f", "examples/application.yaml"), "created")
	require.Eventually(t, func() bool { return strings.Contains(k.Run("get", "app", "demo"), "Running") }, 20*time.Second, 100*time.Millisecond)

	rc, err := clientcmd.RESTConfigFromKubeConfig(kc)
	require.NoError(t, err)
	assert.False(t, rc.Insecure)
	dyn, err := dynamic.NewForConfig(rc)
	require.NoError(t, err)
	list, err := dyn.Resource(appsGVR).Namespace("default").List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	assert.Len(t, list.Items, 1)
	// A watch streams over HTTPS (HTTP/2) too.
	w, err := dyn.Resource(appsGVR).Namespace("default").Watch(context.Background(), metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
	require.NoError(t, err)
	defer w.Stop()
	_, err = dyn.Resource(appsGVR).Namespace("default").Create(context.Background(), app("over-tls", 1), metav1.CreateOptions{})
	require.NoError(t, err)
	select {
	case ev := <-w.ResultChan():
		assert.Equal(t, "over-tls", ev.Object.(metav1.Object).GetName())
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event over HTTPS within 10s")
	}

	// A client that does not trust the CA is refused by its own TLS stack; one that does gets in.
	_, err = http.Get(base + "/healthz")
	var unknown x509.UnknownAuthorityError
	require.True(t, errors.As(err, &unknown), "want an unknown-authority error, got %v", err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(caPEM))
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	for _, host := range []string{"127.0.0.1", "localhost"} {
		_, port, _ := strings.Cut(p.addr, ":")
		resp, err := client.Get("https://" + host + ":" + port + "/healthz")
		require.NoError(t, err, host)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode)
	}
	assert.Contains(t, p.logs(), "newCA=true")
	assert.Equal(t, "admin", request.EventSources(t, base, client, "s3cret-token")["demo"], "TOKEN's user made the write")

	// Restart: same CA, same certificate, and the CA clients already trust still works.
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 0, p.wait(t, 5*time.Second))
	p2 := start(t, env...)
	again, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	require.NoError(t, err)
	assert.Equal(t, caPEM, again)
	require.Eventually(t, func() bool { return strings.Contains(p2.logs(), "newCA=false newCertificate=false") }, 5*time.Second, 20*time.Millisecond)
	kc2 := kubeconfigFor(t, append(env, "ADDR="+p2.addr))
	assert.Equal(t, string(m[1]), string(caDataRE.FindSubmatch(kc2)[1]))
	assert.Contains(t, kubectl.New(t, kc2).Run("get", "apps"), "No resources found")
	resp, err := client.Get("https://" + p2.addr + "/livez")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}
