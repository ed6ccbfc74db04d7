package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/opemu/opemu/test/internal/request"
)

// wideCRDBody is CRD i as JSON: a 56 KB schema of 60 spec fields (every fifth an object of 8,
// nested twice) and 20 status fields, each with a description, as operators' CRDs have them.
func wideCRDBody(t *testing.T, i int) string {
	var props func(prefix string, n, depth int) map[string]any
	props = func(prefix string, n, depth int) map[string]any {
		out := make(map[string]any, n)
		for j := range n {
			name := fmt.Sprintf("%s%d", prefix, j)
			switch {
			case depth > 0 && j%5 == 0:
				out[name] = map[string]any{"type": "object", "description": name + " holds the nested settings of this part of the workload, as the operator reads them.", "properties": props(name+"x", 8, depth-1)}
			case j%7 == 1:
				out[name] = map[string]any{"type": "array", "description": name + " lists the items this component references by name.", "items": map[string]any{"type": "string", "maxLength": 63}}
			case j%3 == 0:
				out[name] = map[string]any{"type": "integer", "format": "int32", "minimum": 0, "description": name + " is a count the controller keeps within bounds."}
			default:
				out[name] = map[string]any{"type": "string", "maxLength": 253, "description": name + " is a setting of the workload that the operator passes through."}
			}
		}
		return out
	}
	group := fmt.Sprintf("g%d.example.com", i)
	return request.Body(t, map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": map[string]any{"name": "widgets." + group},
		"spec": map[string]any{"group": group, "scope": "Namespaced", "names": map[string]any{"kind": "Widget", "plural": "widgets"},
			"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true, "subresources": map[string]any{"status": map[string]any{}},
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "properties": map[string]any{
					"spec": map[string]any{"type": "object", "properties": props("f", 60, 2)}, "status": map[string]any{"type": "object", "properties": props("s", 20, 1)}}}}}}},
	})
}

const crdsPath = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"

// TestCRDsCostAndBounds: a served CRD of 56 KB keeps less than 768 KiB of live heap (about
// 0.5 MB; 1.3 MB when its validators and structural schema were made at once); MAX_CRDS and MAX_CRD_BYTES refuse the
// create beyond them with kube-apiserver's 403 for a create beyond a quota, while CRDs within
// them are still replaced, and a deleted one makes room.
func TestCRDsCostAndBounds(t *testing.T) {
	// Not parallel: the heap is measured alone.
	const n = 20
	bodies := make([]string, n+2)
	for i := range bodies {
		bodies[i] = wideCRDBody(t, i)
	}
	// Room for 21 of them as stored (each a little larger than its body: defaulted, with
	// its status), not 22.
	p := startBinary(t, shippedBinary(t), "ENABLE_CONTROLLER=false", "PPROF=true", "MAX_CRDS=22", fmt.Sprintf("MAX_CRD_BYTES=%d", 21*(len(bodies[0])+2000)))
	base := "http://" + p.addr
	before := liveHeap(t, p)
	for _, b := range bodies[:n] {
		code, body, _ := request.Timed(t, "POST", base+crdsPath, "application/json", b)
		require.Equal(t, http.StatusCreated, code, "%.300s", body)
	}
	perCRD := float64(liveHeap(t, p)-before) / n
	t.Logf("%d CRDs of %d bytes: %.0f bytes of live heap each", n, len(bodies[0]), perCRD)
	assert.Less(t, perCRD, float64(768<<10))

	refused := func(body, bound string) {
		t.Helper()
		code, resp, _ := request.Timed(t, "POST", base+crdsPath, "application/json", body)
		require.Equal(t, http.StatusForbidden, code, "%.300s", resp)
		var st struct {
			Reason, Message string
			Details         struct{ Name, Group, Kind string }
		}
		require.NoError(t, json.Unmarshal(resp, &st))
		assert.Equal(t, "Forbidden", st.Reason)
		assert.Contains(t, st.Message, "is forbidden: exceeded the server's bound")
		assert.Contains(t, st.Message, bound)
		assert.Equal(t, "customresourcedefinitions", st.Details.Kind)
	}
	// A 21st CRD of 56 KB fits MAX_CRD_BYTES; a 22nd does not.
	code, body, _ := request.Timed(t, "POST", base+crdsPath, "application/json", bodies[n])
	require.Equal(t, http.StatusCreated, code, "%.300s", body)
	refused(bodies[n+1], "MAX_CRD_BYTES")

	// Small CRDs up to MAX_CRDS (22), then the refusal.
	small := func(i int) string {
		return fmt.Sprintf(`{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"things.s%d.example.com"},
			"spec":{"group":"s%d.example.com","scope":"Namespaced","names":{"kind":"Thing","plural":"things"},
			"versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}`, i, i)
	}
	code, body, _ = request.Timed(t, "POST", base+crdsPath, "application/json", small(0))
	require.Equal(t, http.StatusCreated, code, "%.300s", body)
	refused(small(1), "MAX_CRDS")
	code, _, _ = request.Timed(t, "GET", base+crdsPath+"/things.s1.example.com", "", "")
	assert.Equal(t, http.StatusNotFound, code, "the refused CRD is not stored")
	code, _, _ = request.Timed(t, "GET", base+"/apis/s1.example.com/v1/things", "", "")
	assert.Equal(t, http.StatusNotFound, code, "the refused CRD is not served")

	// At the bound, a served CRD is still replaced; a deleted one makes room.
	code, body, _ = request.Timed(t, "PATCH", base+crdsPath+"/things.s0.example.com", "application/merge-patch+json", `{"metadata":{"labels":{"a":"b"}}}`)
	assert.Equal(t, http.StatusOK, code, "%.300s", body)
	code, body, _ = request.Timed(t, "DELETE", base+crdsPath+"/things.s0.example.com", "", "")
	require.Equal(t, http.StatusOK, code, "%.300s", body)
	require.Eventually(t, func() bool {
		code, _, _ := request.Timed(t, "GET", base+crdsPath+"/things.s0.example.com", "", "")
		return code == http.StatusNotFound
	}, 5*time.Second, 20*time.Millisecond, "the deleted CRD goes")
	code, body, _ = request.Timed(t, "POST", base+crdsPath, "application/json", small(1))
	assert.Equal(t, http.StatusCreated, code, "%.300s", body)
}
