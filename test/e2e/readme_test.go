package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/yaml"

	"github.com/opemu/opemu/test/internal/tool"
)

// TestREADMEWebhookConfiguration takes the README's ValidatingWebhookConfiguration, fills its
// caBundle from a TLS=self-signed opemu as the README's command does, and calls the webhook the
// way kube-apiserver would: HTTPS to the configured URL, trusting only the caBundle.
func TestREADMEWebhookConfiguration(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile(filepath.Join(tool.Repo(t), "README.md"))
	require.NoError(t, err)
	m := regexp.MustCompile("(?s)### A real cluster's admission webhook.*?cat <<EOF[^\n]*\n(.*?)\nEOF\n").FindSubmatch(readme)
	require.NotNil(t, m, "the README's webhook configuration")
	dir := t.TempDir()
	// The cluster reaches opemu as opemu.example.internal; this test's listener is loopback, so
	// that name is allowed explicitly (the README's ADDR=:8443 listens on every interface).
	p := start(t, "TLS=self-signed", "TLS_DIR="+dir, "TLS_SANS=opemu.example.internal", "ALLOWED_HOSTS=opemu.example.internal", "ENABLE_CONTROLLER=false")
	caPEM, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	require.NoError(t, err)
	manifest := strings.Replace(string(m[1]), "$(base64 -w0 < /srv/opemu/tls/ca.crt)", base64.StdEncoding.EncodeToString(caPEM), 1)

	var cfg admissionregistrationv1.ValidatingWebhookConfiguration
	require.NoError(t, yaml.UnmarshalStrict([]byte(manifest), &cfg))
	require.Len(t, cfg.Webhooks, 1)
	wh := cfg.Webhooks[0]
	require.NotNil(t, wh.ClientConfig.URL)
	u, err := url.Parse(*wh.ClientConfig.URL)
	require.NoError(t, err)
	assert.Equal(t, "/validate", u.Path)
	assert.Equal(t, []string{"v1"}, wh.AdmissionReviewVersions)

	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(wh.ClientConfig.CABundle), "the caBundle is the CA")
	client := &http.Client{Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool}, // the server name is the URL's host
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, p.addr) // the cluster's DNS
		},
	}}
	review := func(image string) map[string]any {
		body := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u1",
		  "kind":{"group":"cloudnative.elide.dev","version":"v1","kind":"Application"},
		  "resource":{"group":"cloudnative.elide.dev","version":"v1","resource":"applications"},
		  "operation":"CREATE","userInfo":{"username":"system:admin"},
		  "object":{"apiVersion":"cloudnative.elide.dev/v1","kind":"Application","metadata":{"name":"a"},"spec":{"replicas":1,"image":"` + image + `"}}}}`
		resp, err := client.Post(u.String(), "application/json", strings.NewReader(body))
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		var out map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
		return out["response"].(map[string]any)
	}
	assert.Equal(t, true, review("nginx:1.27")["allowed"])
	denied := review("ubuntu:22.04")
	assert.Equal(t, false, denied["allowed"])
	assert.EqualValues(t, 403, denied["status"].(map[string]any)["code"])
}
