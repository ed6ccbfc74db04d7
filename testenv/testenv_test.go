package testenv_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/opemu/opemu/app"
	"github.com/opemu/opemu/testenv"
)

// TestMain fails the package if any test leaves a goroutine behind: every environment the
// tests start, successfully or not, must be gone when they end.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var widgets = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}

// TestStartInstallsCRDs: CRDs from a directory (YAML and JSON files, other kinds and files
// skipped), from CRDInstallOptions and from Go values are served and Established when Start
// returns; custom resources can be written at once, with the CRD's defaults, and objects of
// Server.Objects are created after them; discovery lists them; the kubeconfig reaches the same
// server.
func TestStartInstallsCRDs(t *testing.T) {
	t.Parallel()
	seed := map[string]any{"apiVersion": "example.org/v1", "kind": "Thing", "metadata": map[string]any{"name": "seeded", "namespace": "team-a"}}
	env := testenv.New(t, testenv.Options{
		CRDDirectoryPaths:     []string{"testdata/crds"},
		ErrorIfCRDPathMissing: true,
		CRDs:                  []*apiextensionsv1.CustomResourceDefinition{thingsCRD()},
		Server:                app.Config{Objects: []any{seed}},
	})
	ctx := t.Context()
	names := []string{}
	for _, c := range env.CRDs {
		names = append(names, c.Name)
	}
	assert.ElementsMatch(t, []string{"widgets.example.com", "gadgets.example.com", "things.example.org"}, names)

	dyn, err := dynamic.NewForConfig(env.Config)
	require.NoError(t, err)
	crds := dyn.Resource(apiextensionsv1.SchemeGroupVersion.WithResource("customresourcedefinitions"))
	for _, name := range names {
		u, err := crds.Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		var crd apiextensionsv1.CustomResourceDefinition
		require.NoError(t, runtimeFromUnstructured(u, &crd))
		assert.True(t, established(&crd), "%s: %v", name, crd.Status.Conditions)
	}
	_, err = dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace("default").Get(ctx, "not-a-crd", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "a document of another kind is not installed: %v", err)

	w := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]any{"name": "w"}, "spec": map[string]any{}}}
	created, err := dyn.Resource(widgets).Namespace("default").Create(ctx, w, metav1.CreateOptions{})
	require.NoError(t, err)
	size, _, _ := unstructured.NestedInt64(created.Object, "spec", "size")
	assert.Equal(t, int64(1), size, "the CRD's default")

	_, err = dyn.Resource(thingsGVR).Namespace("team-a").Get(ctx, "seeded", metav1.GetOptions{})
	assert.NoError(t, err, "Server.Objects are created after the CRDs")

	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	require.NoError(t, err)
	list, err := dc.ServerResourcesForGroupVersion("example.org/v1")
	require.NoError(t, err)
	require.Len(t, list.APIResources, 1)
	assert.Equal(t, "things", list.APIResources[0].Name)

	cfg, err := clientcmd.RESTConfigFromKubeConfig(env.KubeConfig)
	require.NoError(t, err)
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	ns, err := cs.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
	require.NoError(t, err, "the kubeconfig reaches the server, and default exists")
	assert.Equal(t, corev1.NamespaceActive, ns.Status.Phase)
}

// TestStartErrors: what cannot be installed fails Start with an error saying what, and leaves
// nothing running (TestMain's leak check) and no directory behind.
func TestStartErrors(t *testing.T) {
	t.Parallel()
	bad := thingsCRD()
	bad.Spec.Versions[0].Schema.OpenAPIV3Schema.Type = "no-such-type"
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "v1beta1.yaml"), "apiVersion: apiextensions.k8s.io/v1beta1\nkind: CustomResourceDefinition\nmetadata: {name: old.example.com}\nspec: {group: example.com, names: {kind: Old, plural: olds}}\n")
	writeFile(t, filepath.Join(dir, "broken.yaml"), "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: [not, a, map]\n")
	for _, tc := range []struct {
		name string
		opts testenv.Options
		is   error
		msg  string
	}{
		{name: "missing CRD path", opts: testenv.Options{CRDDirectoryPaths: []string{"testdata/nope"}, ErrorIfCRDPathMissing: true}, is: os.ErrNotExist, msg: "testdata/nope"},
		{name: "missing CRD path of CRDInstallOptions", opts: testenv.Options{CRDInstallOptions: testenv.CRDInstallOptions{Paths: []string{"testdata/nope"}, ErrorIfPathMissing: true}}, is: os.ErrNotExist},
		{name: "invalid CRD", opts: testenv.Options{CRDs: []*apiextensionsv1.CustomResourceDefinition{bad}}, msg: `CustomResourceDefinition "things.example.org"`},
		{name: "v1beta1 CRD", opts: testenv.Options{CRDDirectoryPaths: []string{filepath.Join(dir, "v1beta1.yaml")}}, msg: "only apiextensions.k8s.io/v1 is served"},
		{name: "undecodable CRD", opts: testenv.Options{CRDDirectoryPaths: []string{filepath.Join(dir, "broken.yaml")}}, msg: "broken.yaml"},
		{name: "missing webhook path", opts: testenv.Options{WebhookInstallOptions: testenv.WebhookInstallOptions{Paths: []string{"testdata/nope"}}}, is: os.ErrNotExist},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env, err := testenv.Start(t.Context(), tc.opts)
			require.Error(t, err)
			assert.Nil(t, env)
			if tc.is != nil {
				assert.ErrorIs(t, err, tc.is)
			}
			assert.ErrorContains(t, err, tc.msg)
		})
	}

	t.Run("missing paths skipped unless asked", func(t *testing.T) {
		t.Parallel()
		env := testenv.New(t, testenv.Options{
			CRDDirectoryPaths:     []string{"testdata/nope"},
			WebhookInstallOptions: testenv.WebhookInstallOptions{Paths: []string{"testdata/nope"}, IgnoreErrorIfPathMissing: true},
		})
		assert.Empty(t, env.CRDs)
		assert.Empty(t, env.WebhookInstallOptions.LocalServingCertDir, "no webhook, nothing prepared")
	})
	t.Run("start bounded by its context", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, err := testenv.Start(ctx, testenv.Options{})
		assert.ErrorIs(t, err, context.Canceled)
	})
}

// TestWebhookInstallOptions: the configurations of a directory and of Go values are installed
// pointing at the local webhook server (a service reference becomes the URL of its path, as
// envtest rewrites it) with the CA as caBundle; the serving certificate in LocalServingCertDir
// is for LocalServingHost and chains to LocalServingCAData; Stop removes a directory it made
// and keeps one it was given.
func TestWebhookInstallOptions(t *testing.T) {
	t.Parallel()
	url := "https://example.invalid/keep"
	given := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "given"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "given.example.com", AdmissionReviewVersions: []string{"v1"},
			SideEffects:  ptr(admissionregistrationv1.SideEffectClassNone),
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url},
		}},
	}
	env, err := testenv.Start(t.Context(), testenv.Options{
		CRDDirectoryPaths: []string{"testdata/crds"},
		WebhookInstallOptions: testenv.WebhookInstallOptions{
			Paths:              []string{"testdata/webhooks"},
			ValidatingWebhooks: []*admissionregistrationv1.ValidatingWebhookConfiguration{given},
		},
	})
	require.NoError(t, err)
	w := env.WebhookInstallOptions
	assert.Equal(t, "127.0.0.1", w.LocalServingHost)
	assert.NotZero(t, w.LocalServingPort)
	require.NotEmpty(t, w.LocalServingCAData)
	assert.Nil(t, given.Webhooks[0].ClientConfig.CABundle, "the caller's configuration is not changed")

	// The serving certificate is what controller-runtime's webhook server loads.
	cert, err := tls.LoadX509KeyPair(filepath.Join(w.LocalServingCertDir, "tls.crt"), filepath.Join(w.LocalServingCertDir, "tls.key"))
	require.NoError(t, err)
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	require.NoError(t, err)
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(w.LocalServingCAData))
	_, err = leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "127.0.0.1"})
	assert.NoError(t, err)

	cs, err := kubernetes.NewForConfig(env.Config)
	require.NoError(t, err)
	ctx := t.Context()
	m, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "mutating-webhook-configuration", metav1.GetOptions{})
	require.NoError(t, err)
	base := "https://127.0.0.1:" + itoa(w.LocalServingPort)
	assert.Nil(t, m.Webhooks[0].ClientConfig.Service)
	assert.Equal(t, base+"/mutate-example-com-v1-widget", deref(m.Webhooks[0].ClientConfig.URL))
	assert.Equal(t, w.LocalServingCAData, m.Webhooks[0].ClientConfig.CABundle)
	v, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "validating-webhook-configuration", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, base+"/validate-example-com-v1-widget", deref(v.Webhooks[0].ClientConfig.URL))
	g, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "given", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, url, deref(g.Webhooks[0].ClientConfig.URL), "a URL given is kept")
	assert.Equal(t, w.LocalServingCAData, g.Webhooks[0].ClientConfig.CABundle)
	assert.Len(t, w.MutatingWebhooks, 1)
	assert.Len(t, w.ValidatingWebhooks, 2)

	require.NoError(t, env.Stop())
	_, err = os.Stat(w.LocalServingCertDir)
	assert.ErrorIs(t, err, os.ErrNotExist, "Stop removes the directory it made")

	dir := t.TempDir()
	env2, err := testenv.Start(t.Context(), testenv.Options{WebhookInstallOptions: testenv.WebhookInstallOptions{
		Paths: []string{"testdata/webhooks"}, LocalServingCertDir: dir, LocalServingPort: 9443,
	}})
	require.NoError(t, err)
	assert.Equal(t, 9443, env2.WebhookInstallOptions.LocalServingPort)
	require.NoError(t, env2.Stop())
	_, err = os.Stat(filepath.Join(dir, "tls.crt"))
	assert.NoError(t, err, "a directory given is kept")
}

// TestStop: Stop is idempotent, the port is closed after it, and requests fail.
func TestStop(t *testing.T) {
	t.Parallel()
	env, err := testenv.Start(t.Context(), testenv.Options{})
	require.NoError(t, err)
	resp, err := http.Get(env.Config.Host + "/readyz")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	require.NoError(t, env.Stop())
	require.NoError(t, env.Stop(), "a second Stop returns the first one's result")
	assertClosed(t, env.Config.Host)
}

func thingsCRD() *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "things.example.org"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.org", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: "Thing", Plural: "things"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr(true),
				}},
			}},
		},
	}
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established {
			return c.Status == apiextensionsv1.ConditionTrue
		}
	}
	return false
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
}

func ptr[T any](v T) *T { return &v }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func itoa(n int) string { return strconv.Itoa(n) }

func runtimeFromUnstructured(u *unstructured.Unstructured, into any) error {
	return runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into)
}

// assertClosed checks that nothing listens at host (a URL) any more.
func assertClosed(t *testing.T, host string) {
	t.Helper()
	u, err := neturl.Parse(host)
	require.NoError(t, err)
	conn, err := net.DialTimeout("tcp", u.Host, time.Second)
	if err == nil {
		conn.Close()
	}
	assert.ErrorIs(t, err, syscall.ECONNREFUSED, "%s still accepts connections", u.Host)
}

var thingsGVR = schema.GroupVersionResource{Group: "example.org", Version: "v1", Resource: "things"}

// TestController: opemu's own Application controller runs only when asked for; a suite that
// tests its own controllers does not get a second one acting on the same objects.
func TestController(t *testing.T) {
	t.Parallel()
	apps := schema.GroupVersionResource{Group: "cloudnative.elide.dev", Version: "v1", Resource: "applications"}
	for _, on := range []bool{false, true} {
		t.Run(strconv.FormatBool(on), func(t *testing.T) {
			t.Parallel()
			env := testenv.New(t, testenv.Options{Controller: on})
			cfg := rest.CopyConfig(env.Config)
			cfg.WarningHandler = rest.NoWarnings{} // the built-in admission warns of no limits
			dyn, err := dynamic.NewForConfig(cfg)
			require.NoError(t, err)
			ctx := t.Context()
			app := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "cloudnative.elide.dev/v1", "kind": "Application", "metadata": map[string]any{"name": "demo"},
				"spec": map[string]any{"replicas": int64(2), "image": "nginx:1.27"},
			}}
			_, err = dyn.Resource(apps).Namespace("default").Create(ctx, app, metav1.CreateOptions{})
			require.NoError(t, err)
			phase := func() string {
				got, err := dyn.Resource(apps).Namespace("default").Get(ctx, "demo", metav1.GetOptions{})
				require.NoError(t, err)
				p, _, _ := unstructured.NestedString(got.Object, "status", "phase")
				return p
			}
			if on {
				require.Eventually(t, func() bool { return phase() == "Running" }, 10*time.Second, 10*time.Millisecond)
			} else {
				assert.Empty(t, phase(), "nothing reconciled it")
			}
			// What runs, as the server says (GET /controller lists the controllers by name).
			resp, err := http.Get(env.Config.Host + "/controller")
			require.NoError(t, err)
			defer resp.Body.Close()
			var body struct{ Controllers []struct{ Name string } }
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
			var names []string
			for _, c := range body.Controllers {
				names = append(names, c.Name)
			}
			if on {
				assert.Contains(t, names, "application")
			} else {
				assert.NotContains(t, names, "application")
			}
		})
	}
}

// TestConversionWebhooks: as envtest installs a suite's CRDs, one converted by the suite's
// webhook (here every CRD, IgnoreSchemeConvertible) calls the local webhook server's /convert
// with its CA, whatever conversion its file gave (a Service, as kustomize writes it); without
// a convertible kind in the Scheme the conversion goes, and no certificate is made for it.
func TestConversionWebhooks(t *testing.T) {
	t.Parallel()
	crd := func() *apiextensionsv1.CustomResourceDefinition {
		c := thingsCRD()
		c.Spec.Versions = append(c.Spec.Versions, *c.Spec.Versions[0].DeepCopy())
		c.Spec.Versions[1].Name, c.Spec.Versions[1].Storage = "v2", false
		c.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter, Webhook: &apiextensionsv1.WebhookConversion{
			ConversionReviewVersions: []string{"v1"},
			ClientConfig:             &apiextensionsv1.WebhookClientConfig{Service: &apiextensionsv1.ServiceReference{Namespace: "system", Name: "webhook-service", Path: ptr("/convert")}},
		}}
		return c
	}
	cs := func(env *testenv.Environment) *apiextensionsv1.CustomResourceConversion {
		dyn, err := dynamic.NewForConfig(env.Config)
		require.NoError(t, err)
		u, err := dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}).Get(t.Context(), env.CRDs[0].Name, metav1.GetOptions{})
		require.NoError(t, err)
		var c apiextensionsv1.CustomResourceDefinition
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &c))
		return c.Spec.Conversion
	}

	env := testenv.New(t, testenv.Options{CRDs: []*apiextensionsv1.CustomResourceDefinition{crd()}, WebhookInstallOptions: testenv.WebhookInstallOptions{IgnoreSchemeConvertible: true}})
	w := env.WebhookInstallOptions
	require.NotEmpty(t, w.LocalServingCAData)
	got := cs(env)
	require.NotNil(t, got.Webhook)
	assert.Equal(t, apiextensionsv1.WebhookConverter, got.Strategy)
	assert.Equal(t, "https://127.0.0.1:"+itoa(w.LocalServingPort)+"/convert", deref(got.Webhook.ClientConfig.URL))
	assert.Nil(t, got.Webhook.ClientConfig.Service)
	assert.Equal(t, w.LocalServingCAData, got.Webhook.ClientConfig.CABundle)
	assert.Equal(t, []string{"v1", "v1beta1"}, got.Webhook.ConversionReviewVersions)
	assert.Equal(t, got, env.CRDs[0].Spec.Conversion, "Environment.CRDs are the CRDs installed")

	plain := testenv.New(t, testenv.Options{CRDs: []*apiextensionsv1.CustomResourceDefinition{crd()}, Scheme: runtime.NewScheme()})
	assert.Empty(t, plain.WebhookInstallOptions.LocalServingCAData, "nothing to serve")
	assert.Equal(t, apiextensionsv1.NoneConverter, cs(plain).Strategy)
}
