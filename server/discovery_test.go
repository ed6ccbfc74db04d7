package server_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

const aggregatedAccept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"

// pathRecorder records the paths of the requests a client makes.
type pathRecorder struct {
	mu    sync.Mutex
	paths []string
	next  http.RoundTripper
}

func (p *pathRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	p.mu.Lock()
	p.paths = append(p.paths, r.URL.Path)
	p.mu.Unlock()
	return p.next.RoundTrip(r)
}

// discoveryClient is client-go's discovery client of e, legacy or not, with the paths it asks.
func discoveryClient(t *testing.T, e *env, legacy bool) (*discovery.DiscoveryClient, *pathRecorder) {
	rec := &pathRecorder{}
	cfg := &rest.Config{Host: e.http.URL, WrapTransport: func(rt http.RoundTripper) http.RoundTripper { rec.next = rt; return rec }}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	require.NoError(t, err)
	dc.UseLegacyDiscovery = legacy
	return dc, rec
}

// jsonInto decodes an answer's body into v.
func jsonInto(body []byte, v any) error { return json.Unmarshal(body, v) }

// comparableResource is an APIResource as both forms of discovery describe it (the storage version
// hash is the legacy form's only; a custom resource's group and version the aggregated form's).
// client-go gives a subresource its resource's singular name when it reads the aggregated form.
func comparableResource(r metav1.APIResource) metav1.APIResource {
	r.StorageVersionHash = ""
	if r.Kind != "Scale" {
		r.Group, r.Version = "", ""
	}
	if strings.Contains(r.Name, "/") {
		r.SingularName = ""
	}
	return r
}

// TestAggregatedDiscoveryMatchesLegacy: client-go's discovery client, which prefers the
// aggregated form, learns from /api and /apis alone every group, preferred version and
// resource (with its verbs, short names, categories and subresources) that the legacy form
// gives in one request per group-version.
func TestAggregatedDiscoveryMatchesLegacy(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	require.Equal(t, http.StatusCreated, e.do("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", "application/yaml", multiVersionCRD).code)

	legacy, legacyPaths := discoveryClient(t, e, true)
	aggregated, aggregatedPaths := discoveryClient(t, e, false)
	lg, lr, err := legacy.ServerGroupsAndResources()
	require.NoError(t, err)
	ag, ar, err := aggregated.ServerGroupsAndResources()
	require.NoError(t, err)

	assert.ElementsMatch(t, []string{"/api", "/apis"}, aggregatedPaths.paths, "one request each for the whole API")
	assert.Greater(t, len(legacyPaths.paths), 10, "a request per group-version")
	assert.Equal(t, lg, ag, "the same groups, versions and preferred versions, in the same order")
	require.Equal(t, len(lr), len(ar))
	byGV := func(a, b *metav1.APIResourceList) int { return strings.Compare(a.GroupVersion, b.GroupVersion) }
	slices.SortFunc(lr, byGV)
	slices.SortFunc(ar, byGV)
	for i := range lr {
		require.Equal(t, lr[i].GroupVersion, ar[i].GroupVersion)
		var want, got []metav1.APIResource
		for _, r := range lr[i].APIResources {
			want = append(want, comparableResource(r))
		}
		for _, r := range ar[i].APIResources {
			got = append(got, comparableResource(r))
		}
		assert.Equal(t, want, got, lr[i].GroupVersion)
	}
	// The aggregated form names a custom resource's group and version, not a built-in's.
	for _, list := range ar {
		for _, r := range list.APIResources {
			switch list.GroupVersion {
			case "apps/v1":
				if r.Kind != "Scale" {
					assert.Empty(t, r.Group+r.Version, r.Name)
				}
			case "conformance.example.com/v1beta1":
				assert.Equal(t, schema.GroupVersion{Group: "conformance.example.com", Version: "v1beta1"}, schema.GroupVersion{Group: r.Group, Version: r.Version})
			}
		}
	}
}

// multiVersionCRD is stored as v1 and served as v2alpha1, v1beta1, v1 and v2 (listed in no
// order); kube's version priority makes v2 the preferred version.
const multiVersionCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.conformance.example.com}
spec:
  group: conformance.example.com
  scope: Namespaced
  names: {kind: Widget, plural: widgets}
  versions:
  - {name: v2alpha1, served: true, storage: false, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}
  - {name: v1beta1, served: true, storage: false, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}, subresources: {status: {}}}
  - {name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}
  - {name: v2, served: true, storage: false, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}
`

// kubeGroupOrder is the order of kube-apiserver v1.37.2's groups in /apis (recorded from it).
var kubeGroupOrder = []string{"apiregistration.k8s.io", "apps", "events.k8s.io", "authentication.k8s.io", "authorization.k8s.io",
	"autoscaling", "batch", "certificates.k8s.io", "networking.k8s.io", "policy", "rbac.authorization.k8s.io", "storage.k8s.io",
	"admissionregistration.k8s.io", "apiextensions.k8s.io", "scheduling.k8s.io", "coordination.k8s.io", "node.k8s.io",
	"discovery.k8s.io", "resource.k8s.io", "flowcontrol.apiserver.k8s.io", "storagemigration.k8s.io"}

// TestDiscoveryOrder: groups come in kube-apiserver's order, the groups of CRDs after them by
// name; a group's versions by version priority (GA, beta, alpha; higher first), the first one
// preferred whichever is stored.
func TestDiscoveryOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	require.Equal(t, http.StatusCreated, e.do("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", "application/yaml", multiVersionCRD).code)
	var list metav1.APIGroupList
	require.NoError(t, jsonInto(e.do("GET", "/apis", "", "").body, &list))
	var builtin, custom []string
	for _, g := range list.Groups {
		switch {
		case slices.Contains(kubeGroupOrder, g.Name):
			require.Empty(t, custom, "%s after the CRDs' groups %v", g.Name, custom)
			builtin = append(builtin, g.Name)
		default:
			custom = append(custom, g.Name)
		}
	}
	var want []string
	for _, g := range kubeGroupOrder {
		if slices.Contains(builtin, g) {
			want = append(want, g)
		}
	}
	assert.Equal(t, want, builtin)
	assert.True(t, slices.IsSorted(custom), "%v", custom)
	assert.Contains(t, custom, "cloudnative.elide.dev")

	var g metav1.APIGroup
	require.NoError(t, jsonInto(e.do("GET", "/apis/conformance.example.com", "", "").body, &g))
	var versions []string
	for _, v := range g.Versions {
		versions = append(versions, v.Version)
	}
	assert.Equal(t, []string{"v2", "v1", "v1beta1", "v2alpha1"}, versions)
	assert.Equal(t, "v2", g.PreferredVersion.Version)
}

// TestStorageVersionHash: discovery's hashes are kube-apiserver's (values recorded from it):
// of the stored group, version and kind, so events.k8s.io Events share the core Events'.
// (kube-apiserver stores CRDs as v1beta1, opemu as v1: their hashes differ, as they should.)
func TestStorageVersionHash(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	require.Equal(t, http.StatusCreated, e.do("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", "application/yaml", multiVersionCRD).code)
	hashes := map[string]string{}
	for _, gv := range []string{"/api/v1", "/apis/apps/v1", "/apis/events.k8s.io/v1", "/apis/conformance.example.com/v1beta1"} {
		var list metav1.APIResourceList
		require.NoError(t, jsonInto(e.do("GET", gv, "", "").body, &list))
		for _, r := range list.APIResources {
			if strings.Contains(r.Name, "/") {
				assert.Empty(t, r.StorageVersionHash, "a subresource has none: %s", r.Name)
				continue
			}
			hashes[list.GroupVersion+" "+r.Name] = r.StorageVersionHash
		}
	}
	for key, want := range map[string]string{
		"v1 configmaps":                           "qFsyl6wFWjQ=",
		"v1 events":                               "r2yiGXH7wu8=",
		"events.k8s.io/v1 events":                 "r2yiGXH7wu8=",
		"apps/v1 deployments":                     "8aSe+NMegvE=",
		"conformance.example.com/v1beta1 widgets": "ymGBWOX53mo=", // stored as v1
	} {
		assert.Equal(t, want, hashes[key], key)
	}
}

// TestAggregatedDiscoveryNegotiation: the aggregated form comes back whenever the Accept header
// offers it in JSON, wherever in the header; the legacy form otherwise. It carries an ETag, and
// a client that has it gets 304.
func TestAggregatedDiscoveryNegotiation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, tt := range []struct {
		accept     string
		aggregated bool
	}{
		{"", false},
		{"*/*", false},
		{"application/json", false},
		{aggregatedAccept, true},
		{aggregatedAccept + ",application/json", true},
		{"application/json," + aggregatedAccept + ";q=0.5", true},
		{aggregatedAccept + ";profile=nopeer," + aggregatedAccept, true},
		{"application/json;as=APIGroupDiscoveryList;v=v2;g=apidiscovery.k8s.io", true},
		{"application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json", false},
		{"application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json", false},
	} {
		for _, path := range []string{"/api", "/apis"} {
			r := e.doAccept("GET", path, tt.accept)
			require.Equal(t, http.StatusOK, r.code, "%s %q", path, tt.accept)
			kind := r.json(t)["kind"]
			if tt.aggregated {
				assert.Equal(t, "APIGroupDiscoveryList", kind, "%s %q", path, tt.accept)
				assert.Equal(t, aggregatedAccept, r.header.Get("Content-Type"))
				assert.Equal(t, "Accept", r.header.Get("Vary"))
				continue
			}
			assert.Contains(t, []any{"APIVersions", "APIGroupList"}, kind, "%s %q", path, tt.accept)
			assert.Equal(t, "application/json", r.header.Get("Content-Type"))
		}
	}

	first := e.doAccept("GET", "/apis", aggregatedAccept)
	etag := first.header.Get("Etag")
	require.NotEmpty(t, etag)
	req, err := http.NewRequest("GET", e.http.URL+"/apis", nil)
	require.NoError(t, err)
	req.Header.Set("Accept", aggregatedAccept)
	req.Header.Set("If-None-Match", etag)
	resp, err := e.http.Client().Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusNotModified, resp.StatusCode)

	// A new CRD is a new document.
	require.Equal(t, http.StatusCreated, e.do("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", "application/yaml", multiVersionCRD).code)
	second := e.doAccept("GET", "/apis", aggregatedAccept)
	assert.NotEqual(t, etag, second.header.Get("Etag"))
	assert.Contains(t, string(second.body), `"conformance.example.com"`)
}

// TestNamespacesTakeNoDeleteCollection: as in kube-apiserver, DELETE on the namespaces
// collection is refused (405) and nothing is deleted; discovery does not offer the verb.
func TestNamespacesTakeNoDeleteCollection(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	require.Equal(t, http.StatusCreated, e.do("POST", "/api/v1/namespaces", "application/json", `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"kept"}}`).code)
	status(t, e.do("DELETE", "/api/v1/namespaces", "", ""), http.StatusMethodNotAllowed, "MethodNotAllowed")
	assert.Equal(t, http.StatusOK, e.do("GET", "/api/v1/namespaces/kept", "", "").code)
	var list metav1.APIResourceList
	require.NoError(t, jsonInto(e.do("GET", "/api/v1", "", "").body, &list))
	for _, r := range list.APIResources {
		if r.Name == "namespaces" {
			assert.NotContains(t, r.Verbs, "deletecollection")
		}
		if r.Name == "configmaps" {
			assert.Contains(t, r.Verbs, "deletecollection")
		}
	}
}
