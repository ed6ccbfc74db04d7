package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/opemu/opemu/test/internal/request"
)

// Hostile request bodies that decoding used to pay for (issue 34), against the binary as it
// ships (shippedBinary), as limits_test.go's.

// shippedWithApplication starts the binary as it ships, without the controller, and creates the
// Application web in it; api is the Applications' collection.
func shippedWithApplication(t *testing.T) (p *proc, api string) {
	t.Helper()
	p = startBinary(t, shippedBinary(t), "ENABLE_CONTROLLER=false")
	api = "http://" + p.addr + "/apis/cloudnative.elide.dev/v1/namespaces/default/applications"
	code, _, _ := request.Timed(t, "POST", api, "application/json", request.AppJSON)
	require.Equal(t, http.StatusCreated, code)
	return p, api
}

// TestYAMLAliasesInTimeAndMemory: a 2 MB YAML body of 500 aliases of one 2 MB scalar (1 GB once
// expanded; it took 3.45 GB before) is refused with a 413 within 5 s on create, update and
// server-side apply, and the process's peak resident size grows by less than 100 MB over all
// three.
func TestYAMLAliasesInTimeAndMemory(t *testing.T) {
	// Not parallel: measured alone, and kept from starving the timing-bound HA tests.
	p, api := shippedWithApplication(t)
	before := procStatus(t, p, "VmHWM")

	bomb := func(name string) string {
		var b strings.Builder
		fmt.Fprintf(&b, "apiVersion: cloudnative.elide.dev/v1\nkind: Application\nmetadata: {name: %s}\nspec:\n  replicas: 1\n  image: nginx:1\n  config:\n    a0: &big %s\n", name, strings.Repeat("x", 2<<20))
		for i := 1; i <= 500; i++ {
			fmt.Fprintf(&b, "    a%d: *big\n", i)
		}
		return b.String()
	}
	for _, tt := range []struct{ name, method, url, contentType, body string }{
		{"create", "POST", api, "application/yaml", bomb("bomb")},
		{"update", "PUT", api + "/web", "application/yaml", bomb("web")},
		{"server-side apply", "PATCH", api + "/web?fieldManager=m", "application/apply-patch+yaml", bomb("web")},
	} {
		code, body, took := request.Timed(t, tt.method, tt.url, tt.contentType, tt.body)
		t.Logf("%s of %.1f MB of YAML: %d in %v", tt.name, float64(len(tt.body))/1e6, code, took)
		assert.Equal(t, http.StatusRequestEntityTooLarge, code, "%s: %.300s", tt.name, body)
		assert.Contains(t, string(body), `"reason":"RequestEntityTooLarge"`, tt.name)
		assert.Less(t, took, 5*time.Second, tt.name)
	}
	grew := procStatus(t, p, "VmHWM") - before
	t.Logf("peak RSS grew by %.1f MB over the aliases", float64(grew)/(1<<20))
	assert.Less(t, grew, int64(100<<20))
}

// TestHugeNumbersRefusedBeforeValidation: a 3-million-digit integer (it took 30.8 s in the schema
// validator, or was stored where the schema keeps any value) is refused as kube-apiserver's
// JSON decoding refuses a number beyond int64 and float64, a 400, within 5 s, in a create and a
// merge patch; a server-side apply of it is refused within 5 s too.
func TestHugeNumbersRefusedBeforeValidation(t *testing.T) {
	// Not parallel: measured alone, and kept from starving the timing-bound HA tests.
	_, api := shippedWithApplication(t)
	huge := strings.Repeat("9", 3_000_000)
	for _, tt := range []struct{ name, method, url, contentType, body string }{
		{"create, in a schema-checked integer", "POST", api, "application/json",
			`{"apiVersion":"cloudnative.elide.dev/v1","kind":"Application","metadata":{"name":"huge"},"spec":{"replicas":` + huge + `,"image":"nginx:1"}}`},
		{"create, where the schema keeps any value", "POST", api, "application/json",
			`{"apiVersion":"cloudnative.elide.dev/v1","kind":"Application","metadata":{"name":"huge"},"spec":{"replicas":1,"image":"nginx:1","config":{"n":` + huge + `}}}`},
		{"merge patch", "PATCH", api + "/web", "application/merge-patch+json", `{"spec":{"replicas":` + huge + `}}`},
	} {
		code, body, took := request.Timed(t, tt.method, tt.url, tt.contentType, tt.body)
		t.Logf("%s: %d in %v", tt.name, code, took)
		assert.Equal(t, http.StatusBadRequest, code, "%s: %.300s", tt.name, body)
		assert.Contains(t, string(body), "cannot unmarshal number 9999", tt.name)
		assert.Less(t, took, 5*time.Second, tt.name)
	}
	// kube-apiserver's apply fails with a 500 (its YAML decoding makes the number a string that
	// its typed patch refuses); opemu's meets a conflict (defects.yaml: apply-number-beyond-float64).
	code, body, took := request.Timed(t, "PATCH", api+"/web?fieldManager=m", "application/apply-patch+yaml",
		`{"apiVersion":"cloudnative.elide.dev/v1","kind":"Application","metadata":{"name":"web"},"spec":{"replicas":`+huge+`,"image":"nginx:1"}}`)
	t.Logf("server-side apply: %d in %v", code, took)
	assert.GreaterOrEqual(t, code, 400, "%.300s", body)
	assert.Less(t, took, 5*time.Second, "server-side apply")
	code, _, _ = request.Timed(t, "GET", api+"/huge", "", "")
	assert.Equal(t, http.StatusNotFound, code, "nothing stored")
}

// TestWarningsCapped: a create with 150,000 unknown fields (7.2 MB of Warning headers before,
// which clients failed to read) answers at most kube-apiserver's 4,096 characters of warnings;
// client-go's create of it succeeds and hands its warnings to the client's handler.
func TestWarningsCapped(t *testing.T) {
	// Not parallel, and the binary as it ships: pruning 150,000 fields takes seconds under the
	// race detector, past the 5 s every request has.
	p := startBinary(t, shippedBinary(t), "ENABLE_CONTROLLER=false")
	api := "http://" + p.addr + "/apis/cloudnative.elide.dev/v1/namespaces/default/applications"
	spec := map[string]any{"replicas": int64(1), "image": "nginx:1"}
	for i := range 150_000 {
		spec[fmt.Sprintf("unknown%06d", i)] = int64(1)
	}
	obj := map[string]any{"apiVersion": "cloudnative.elide.dev/v1", "kind": "Application", "metadata": map[string]any{"name": "curl"}, "spec": spec}

	body := request.Body(t, obj)
	start := time.Now()
	resp, err := http.Post(api, "application/json", strings.NewReader(body))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	warnings := resp.Header.Values("Warning")
	text := 0
	for _, w := range warnings {
		text += len([]rune(strings.ReplaceAll(strings.TrimSuffix(strings.TrimPrefix(w, `299 - "`), `"`), `\"`, `"`)))
	}
	t.Logf("150,000 unknown fields: %d warnings, %d characters of text in %v", len(warnings), text, time.Since(start))
	assert.NotEmpty(t, warnings)
	// kube-apiserver's recorder stops once past 4,096: by at most one message of 256.
	assert.LessOrEqual(t, text, 4096+256)

	start = time.Now()
	h := &warningsKept{}
	cfg := restConfig(p)
	cfg.WarningHandlerWithContext = h
	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	obj["metadata"] = map[string]any{"name": "client-go"}
	gvr := schema.GroupVersionResource{Group: "cloudnative.elide.dev", Version: "v1", Resource: "applications"}
	created, err := dyn.Resource(gvr).Namespace("default").Create(context.Background(), &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
	require.NoError(t, err, "client-go reads the committed write")
	t.Logf("client-go's create: %v", time.Since(start))
	assert.Equal(t, "client-go", created.GetName())
	assert.Len(t, h.all(), len(warnings), "the same warnings reach client-go")
	_, err = dyn.Resource(gvr).Namespace("default").Get(context.Background(), "client-go", metav1.GetOptions{})
	require.NoError(t, err)
}

// warningsKept is a client-go warning handler that keeps what it is handed.
type warningsKept struct {
	mu   sync.Mutex
	kept []string
}

func (w *warningsKept) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.kept = append(w.kept, text)
}

func (w *warningsKept) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.kept...)
}
