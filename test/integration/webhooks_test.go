package integration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/opemu/opemu/certs"
	"github.com/opemu/opemu/test/internal/request"
)

// configMapPolicy is an operator author's webhook for ConfigMaps, written with
// controller-runtime: it labels every ConfigMap, refuses a key named "password" and warns of
// empty ones. It counts the dry runs it sees.
type configMapPolicy struct{ dryRuns atomic.Int64 }

func (p *configMapPolicy) Default(ctx context.Context, cm *corev1.ConfigMap) error {
	if req, err := admission.RequestFromContext(ctx); err == nil && req.DryRun != nil && *req.DryRun {
		p.dryRuns.Add(1)
	}
	if cm.Labels == nil {
		cm.Labels = map[string]string{}
	}
	cm.Labels["policy.opemu.test/checked"] = "true"
	return nil
}

func (p *configMapPolicy) ValidateCreate(_ context.Context, cm *corev1.ConfigMap) (admission.Warnings, error) {
	return p.validate(cm)
}

func (p *configMapPolicy) ValidateUpdate(_ context.Context, _, cm *corev1.ConfigMap) (admission.Warnings, error) {
	return p.validate(cm)
}

func (p *configMapPolicy) ValidateDelete(context.Context, *corev1.ConfigMap) (admission.Warnings, error) {
	return nil, nil
}

func (p *configMapPolicy) validate(cm *corev1.ConfigMap) (admission.Warnings, error) {
	if _, ok := cm.Data["password"]; ok {
		return nil, errors.New("passwords belong in a Secret, not in ConfigMap " + cm.Name)
	}
	if len(cm.Data) == 0 {
		return admission.Warnings{"ConfigMap " + cm.Name + " is empty"}, nil
	}
	return nil, nil
}

// startWebhookServer serves p with controller-runtime's webhook server over HTTPS, with a
// certificate for 127.0.0.1 from a CA made for the test; it returns the base URL, the CA (the
// caBundle) and a function that stops the server.
func startWebhookServer(t *testing.T, p *configMapPolicy) (string, []byte, func()) {
	t.Helper()
	crlog.SetLogger(logr.Discard())
	dir := t.TempDir()
	bundle, err := certs.Ensure(certs.Config{Dir: dir, Hosts: []string{"127.0.0.1"}})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	srv := webhook.NewServer(webhook.Options{Host: "127.0.0.1", Port: port, CertDir: dir})
	srv.Register("/mutate-configmap", admission.WithDefaulter[*corev1.ConfigMap](scheme.Scheme, p))
	srv.Register("/validate-configmap", admission.WithValidator[*corev1.ConfigMap](scheme.Scheme, p))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Error("the webhook server did not stop within 10s")
			}
		})
	}
	t.Cleanup(stop)
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(bundle.CAPEM))
	require.Eventually(t, func() bool {
		c, err := tls.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port), &tls.Config{RootCAs: roots})
		if err == nil {
			c.Close()
		}
		return err == nil
	}, 10*time.Second, 20*time.Millisecond, "the webhook server serves TLS with the test's CA")
	return "https://127.0.0.1:" + strconv.Itoa(port), bundle.CAPEM, stop
}

// webhookConfigs are the two configurations of configMapPolicy.
func webhookConfigs(url string, ca []byte, failurePolicy, sideEffects string) string {
	caBundle := base64.StdEncoding.EncodeToString(ca)
	return fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: configmap-policy}
webhooks:
- name: mcm.policy.opemu.test
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Ignore
  clientConfig: {url: "%[1]s/mutate-configmap", caBundle: "%[2]s"}
  rules:
  - {apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [configmaps]}
  namespaceSelector:
    matchExpressions: [{key: kubernetes.io/metadata.name, operator: NotIn, values: [kube-system]}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: configmap-policy}
webhooks:
- name: vcm.policy.opemu.test
  admissionReviewVersions: [v1]
  sideEffects: %[4]s
  failurePolicy: %[3]s
  timeoutSeconds: 5
  clientConfig: {url: "%[1]s/validate-configmap", caBundle: "%[2]s"}
  rules:
  - {apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [configmaps]}
`, url, caBundle, failurePolicy, sideEffects)
}

// TestAdmissionWebhooks: a webhook server written with controller-runtime, over HTTPS with a
// caBundle, defaults and rejects ConfigMaps written by kubectl; a dry run reaches it with
// sideEffects None (Unknown is refused); while it is down, failurePolicy Ignore lets
// writes through and Fail answers a Status saying why.
func TestAdmissionWebhooks(t *testing.T) {
	t.Parallel()
	p := start(t)
	k := p.kubectl(t)
	policy := &configMapPolicy{}
	url, ca, stop := startWebhookServer(t, policy)
	k.Apply(webhookConfigs(url, ca, "Ignore", "None"))

	// kubectl's write, defaulted.
	k.Run("create", "configmap", "settings", "--from-literal=color=blue")
	assert.Equal(t, "true", k.Run("get", "configmap", "settings", "-o", "jsonpath={.metadata.labels.policy\\.opemu\\.test/checked}"))

	// Rejected, with the webhook's message.
	out, err := k.Cmd(context.Background(), "create", "configmap", "secrets", "--from-literal=password=hunter2").CombinedOutput()
	require.Error(t, err, "kubectl must fail:\n%s", out)
	assert.Contains(t, string(out), `admission webhook "vcm.policy.opemu.test" denied the request: passwords belong in a Secret, not in ConfigMap secrets`)
	code, _ := request.JSON(t, "GET", "http://"+p.addr+"/api/v1/namespaces/default/configmaps/secrets", "")
	assert.Equal(t, 404, code, "nothing stored")

	assert.True(t, strings.Contains(request.Metrics(t, "http://"+p.addr), `webhook_requests_total{allowed="false",operation="CREATE",webhook="vcm.policy.opemu.test"} 1`),
		"webhook_requests_total counts the configured webhook's denial")

	// Warnings reach kubectl.
	out, err = k.Cmd(context.Background(), "create", "configmap", "empty").CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "Warning: ConfigMap empty is empty")

	// A dry run reaches a webhook without side effects...
	before := policy.dryRuns.Load()
	k.Run("create", "configmap", "trial", "--from-literal=a=b", "--dry-run=server")
	assert.Greater(t, policy.dryRuns.Load(), before, "sideEffects None: the dry run is sent")
	code, _ = request.JSON(t, "GET", "http://"+p.addr+"/api/v1/namespaces/default/configmaps/trial", "")
	assert.Equal(t, 404, code, "a dry run stores nothing")

	// ...and one whose side effects are Unknown cannot be configured: admissionregistration/v1
	// refuses it, as kube-apiserver does (one an older server stored is refused dry runs:
	// hooks' TestWebhookDryRun).
	apply := k.Cmd(context.Background(), "apply", "-f", "-")
	apply.Stdin = strings.NewReader(webhookConfigs(url, ca, "Ignore", "Unknown"))
	out, err = apply.CombinedOutput()
	require.Error(t, err, "kubectl must fail:\n%s", out)
	assert.Contains(t, string(out), `webhooks[0].sideEffects: Unsupported value: "Unknown": supported values: "None", "NoneOnDryRun"`)

	// The webhook goes down: Ignore lets writes through...
	stop()
	k.Run("create", "configmap", "while-down", "--from-literal=a=b")
	// ...Fail answers a clear Status.
	k.Apply(webhookConfigs(url, ca, "Fail", "None"))
	require.Eventually(t, func() bool {
		out, err := k.Cmd(context.Background(), "create", "configmap", "refused", "--from-literal=a=b").CombinedOutput()
		return err != nil && strings.Contains(string(out), `Internal error occurred: failed calling webhook "vcm.policy.opemu.test": failed to call webhook: Post "`+url+`/validate-configmap?timeout=5s": no answer (opemu's log has the cause)`)
	}, 10*time.Second, 100*time.Millisecond)
	// The configuration itself can always be removed.
	k.Run("delete", "validatingwebhookconfiguration", "configmap-policy")
	require.Eventually(t, func() bool {
		_, err := k.Cmd(context.Background(), "create", "configmap", "after", "--from-literal=a=b").CombinedOutput()
		return err == nil
	}, 10*time.Second, 100*time.Millisecond)
}
