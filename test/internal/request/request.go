// Package request makes the plain HTTP requests opemu's e2e and integration tests send to a
// running opemu, whichever way it was started: JSON in and out, and the reads of opemu's own
// routes the tests check (a reconcile history, the controller's queue, /metrics, the sources of
// Events, the elector's Lease), with the fixtures several tests create the same way.
//
// Concurrency: the functions are safe for parallel tests; they use http.DefaultClient unless
// given a client.
package request

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// AppJSON is the Application web: 2 replicas of nginx:1.27.
const AppJSON = `{"apiVersion":"cloudnative.elide.dev/v1","kind":"Application","metadata":{"name":"web"},"spec":{"replicas":2,"image":"nginx:1.27"}}`

// JSON sends body (JSON, when not empty) with method to url and returns the status code and the
// answer decoded as a JSON object (nil when it is not one).
func JSON(t testing.TB, method, url, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m
}

// Timed sends body with method and contentType (when not empty) to url, and returns the status
// code, the answer and how long it took; the client gives up after a minute.
func Timed(t testing.TB, method, url, contentType, body string) (int, []byte, time.Duration) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	client := &http.Client{Timeout: 60 * time.Second}
	start := time.Now()
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, time.Since(start)
}

// Body is v encoded as JSON.
func Body(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// Get GETs url, requires a 200, and returns the answer as a JSON object.
func Get(t testing.TB, url string) map[string]any {
	t.Helper()
	code, m := JSON(t, "GET", url, "")
	require.Equal(t, http.StatusOK, code, "GET %s: %v", url, m)
	return m
}

// History returns the reconcile history of object name of the collection at api (its
// /history subresource), oldest first.
func History(t testing.TB, api, name string) []any {
	t.Helper()
	items, _ := Get(t, api+"/"+name+"/history")["items"].([]any)
	return items
}

// Queue returns the Application controller's state at base (/controller): whether it is paused
// and running, and its queue by object (state, due, failures).
func Queue(t testing.TB, base string) (paused, running bool, queue map[string]map[string]any) {
	t.Helper()
	m := Get(t, base+"/controller?controller=application")
	c := m["controllers"].([]any)[0].(map[string]any)
	queue = map[string]map[string]any{}
	for _, it := range c["queue"].([]any) {
		item := it.(map[string]any)
		queue[item["object"].(string)] = item
	}
	return c["paused"].(bool), c["running"].(bool), queue
}

// Lease reads the elector's Lease (default/elide-operator-leader) from base twice: with
// client-go's typed client, and as raw JSON decoded strictly into coordinationv1.Lease (a field
// Kubernetes does not have fails it); it returns the first and the second's spec.
func Lease(t testing.TB, base string) (*coordinationv1.Lease, map[string]any) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: base})
	require.NoError(t, err)
	lease, err := cs.CoordinationV1().Leases("default").Get(context.Background(), "elide-operator-leader", metav1.GetOptions{})
	require.NoError(t, err)

	resp, err := http.Get(base + "/apis/coordination.k8s.io/v1/namespaces/default/leases/elide-operator-leader")
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var strict coordinationv1.Lease
	require.NoError(t, dec.Decode(&strict), "the Lease is a valid coordination.k8s.io/v1 Lease: %s", raw)
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m))
	return lease, m["spec"].(map[string]any)
}

// MicroTime matches how a LeaseSpec writes acquireTime and renewTime (metav1.MicroTime).
const MicroTime = `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$`

// Metrics returns the text of base's /metrics.
func Metrics(t testing.TB, base string) string {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(body)
}

// EventSources returns, by Application, the source component of its Created Event at base,
// read with client and token: the user whose write created it.
func EventSources(t testing.TB, base string, client *http.Client, token string) map[string]string {
	t.Helper()
	req, err := http.NewRequest("GET", base+"/api/v1/namespaces/default/events?fieldSelector=reason%3DCreated", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var list struct {
		Items []struct {
			InvolvedObject struct{ Name string }
			Source         struct{ Component string }
		}
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&list))
	out := map[string]string{}
	for _, e := range list.Items {
		out[e.InvolvedObject.Name] = e.Source.Component
	}
	return out
}

// CreateGadgets creates, on the server at base, a Gadget CRD, a Controller of gadgets calling
// hook, and the Gadget g1.
func CreateGadgets(t testing.TB, base, hook string) {
	t.Helper()
	for _, step := range []struct{ path, body string }{
		{"/apis/apiextensions.k8s.io/v1/customresourcedefinitions", `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
			"metadata":{"name":"gadgets.example.com"},"spec":{"group":"example.com","scope":"Namespaced",
			"names":{"kind":"Gadget","plural":"gadgets","singular":"gadget"},
			"versions":[{"name":"v1","served":true,"storage":true,"subresources":{"status":{}},
			"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}`},
		{"/apis/controllers.opemu.dev/v1/controllers", `{"apiVersion":"controllers.opemu.dev/v1","kind":"Controller","metadata":{"name":"gadgets"},
			"spec":{"resource":{"group":"example.com","version":"v1","plural":"gadgets"},"hook":{"url":"` + hook + `"}}}`},
		{"/apis/example.com/v1/namespaces/default/gadgets", `{"apiVersion":"example.com/v1","kind":"Gadget","metadata":{"name":"g1"},"spec":{"size":1}}`},
	} {
		code, m := JSON(t, "POST", base+step.path, step.body)
		require.Equal(t, http.StatusCreated, code, "POST %s: %v", step.path, m)
	}
}
