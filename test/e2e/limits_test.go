package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/opemu/opemu/test/internal/request"
)

// Hostile input against the binary as it ships (shippedBinary): SPEC's bounds of time and memory
// are properties of that build, which the race detector's instrumentation would multiply.

// TestPatchBombsInTimeAndMemory: the JSON Patches that took 33 s and 5.3 GB (19 doubling
// copies in 2 KB) and 18.7 GB (2.5 MB of copies) answer within 5 s, and the process's peak
// resident size grows by less than 100 MB over both.
func TestPatchBombsInTimeAndMemory(t *testing.T) {
	// Not parallel: measured alone, and kept from starving the timing-bound HA tests.
	p := startBinary(t, shippedBinary(t), "ENABLE_CONTROLLER=false")
	api := "http://" + p.addr + "/apis/cloudnative.elide.dev/v1/namespaces/default/applications"
	code, _, _ := request.Timed(t, "POST", api, "application/json", request.AppJSON)
	require.Equal(t, http.StatusCreated, code)
	before := procStatus(t, p, "VmHWM")

	doubling := []map[string]any{{"op": "add", "path": "/spec/config", "value": map[string]any{"a": strings.Repeat("x", 1024)}}}
	for i := range 18 {
		doubling = append(doubling, map[string]any{"op": "copy", "from": "/spec/config", "path": fmt.Sprintf("/spec/config/c%d", i)})
	}
	var wide []map[string]any
	for i := 0; len(wide) < 9000; i++ {
		wide = append(wide, map[string]any{"op": "copy", "from": "/spec", "path": fmt.Sprintf("/spec/config/c%d", i)})
	}
	wideBody := request.Body(t, append([]map[string]any{{"op": "add", "path": "/spec/config", "value": map[string]any{"pad": strings.Repeat("x", 2<<20)}}}, wide...))
	for _, tt := range []struct {
		name, body string
		code       int
	}{
		{"19 doubling copies (2 KB)", request.Body(t, doubling), http.StatusUnprocessableEntity},
		{fmt.Sprintf("9,000 copies of a 2 MB subtree (%.1f MB)", float64(len(wideBody))/1e6), wideBody, http.StatusUnprocessableEntity},
	} {
		code, body, took := request.Timed(t, "PATCH", api+"/web", "application/json-patch+json", tt.body)
		t.Logf("%s: %d in %v", tt.name, code, took)
		assert.Equal(t, tt.code, code, "%s", body)
		assert.Less(t, took, 5*time.Second, tt.name)
	}
	grew := procStatus(t, p, "VmHWM") - before
	t.Logf("peak RSS grew by %.1f MB over the bombs", float64(grew)/(1<<20))
	assert.Less(t, grew, int64(100<<20))
}

// TestHostileRequestsInTime: every request of the matrix the built binary once took seconds
// to minutes over answers within SPEC's 5 s.
func TestHostileRequestsInTime(t *testing.T) {
	// Not parallel: measured alone, and kept from starving the timing-bound HA tests.
	p := startBinary(t, shippedBinary(t), "ENABLE_CONTROLLER=false")
	base := "http://" + p.addr
	api := base + "/apis/cloudnative.elide.dev/v1/namespaces/default/applications"
	code, _, _ := request.Timed(t, "POST", api, "application/json", request.AppJSON)
	require.Equal(t, http.StatusCreated, code)
	fins := make([]string, 200000)
	for i := range fins {
		fins[i] = "x.io/f"
	}
	long := fmt.Sprintf(`{"apiVersion":"cloudnative.elide.dev/v1","kind":"Application","metadata":{"name":"long","finalizers":%s},"spec":{"replicas":1,"image":"nginx:1"}}`, request.Body(t, fins))
	code, _, _ = request.Timed(t, "POST", api, "application/json", long)
	require.Equal(t, http.StatusCreated, code)

	many := make([]map[string]any, 65536)
	for i := range many {
		many[i] = map[string]any{"op": "test", "path": "/spec/replicas", "value": 2}
	}
	inserts := make([]map[string]any, 3000)
	for i := range inserts {
		inserts[i] = map[string]any{"op": "add", "path": "/metadata/finalizers/0", "value": "y.io/f"}
	}
	deep := func(d int, key string) string {
		return strings.Repeat(`{"`+key+`":`, d) + "{}" + strings.Repeat("}", d)
	}
	deepApply := fmt.Sprintf(`{"apiVersion":"cloudnative.elide.dev/v1","kind":"Application","metadata":{"name":"deep"},"spec":{"replicas":1,"image":"nginx:1","deep":%s}}`, deep(9000, strings.Repeat("k", 100)))
	for _, tt := range []struct {
		name, method, url, contentType, body string
		code                                 int
	}{
		{"JSON Patch of 65,536 operations", "PATCH", api + "/web", "application/json-patch+json", request.Body(t, many), http.StatusRequestEntityTooLarge},
		{"JSON Patch of 3,000 inserts into a 200,000-item list", "PATCH", api + "/long", "application/json-patch+json", request.Body(t, inserts), http.StatusRequestEntityTooLarge},
		{"server-side apply of a 9,000-deep 1 MB object", "PATCH", api + "/deep?fieldManager=m", "application/apply-patch+yaml", deepApply, http.StatusUnprocessableEntity},
		{"merge patch 9,000 deep", "PATCH", api + "/web", "application/merge-patch+json", `{"spec":{"deep":` + deep(9000, "k") + `}}`, http.StatusUnprocessableEntity},
		{"list with a 469 KB label selector", "GET", api + "?labelSelector=" + url.QueryEscape(strings.Repeat("a,", 240000)+"a"), "", "", http.StatusBadRequest},
		{"JSON Patch of 50 inserts into a 200,000-item list", "PATCH", api + "/long", "application/json-patch+json", request.Body(t, inserts[:50]), http.StatusOK},
	} {
		code, body, took := request.Timed(t, tt.method, tt.url, tt.contentType, tt.body)
		t.Logf("%s: %d in %v", tt.name, code, took)
		assert.Equal(t, tt.code, code, "%s: %.300s", tt.name, body)
		assert.Less(t, took, 5*time.Second, tt.name)
	}

	// Bodies that never finish: each is answered, and its connection let go, within the 5 s
	// deadline (plus the time to notice), whether the handler reads the body or not and
	// whatever the query says.
	for _, tt := range []struct {
		name, head string
		code       int
	}{
		{"GET /healthz with an unsent body", "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n", http.StatusOK},
		{"POST with watch=true and an unsent body", "POST /apis/cloudnative.elide.dev/v1/namespaces/default/applications?watch=true HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n", http.StatusGatewayTimeout},
	} {
		start := time.Now()
		conn, err := net.Dial("tcp", p.addr)
		require.NoError(t, err)
		defer conn.Close()
		_, err = io.WriteString(conn, tt.head+"\r\n"+`{"apiVersion":`)
		require.NoError(t, err)
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(20*time.Second)))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		require.NoError(t, err, tt.name)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		answered := time.Since(start)
		_, err = conn.Read(make([]byte, 1))
		closed := time.Since(start)
		t.Logf("%s: %d in %v, connection closed after %v", tt.name, resp.StatusCode, answered, closed)
		assert.Equal(t, tt.code, resp.StatusCode, tt.name)
		assert.ErrorIs(t, err, io.EOF, "%s: the server lets the connection go", tt.name)
		assert.LessOrEqual(t, answered, 5*time.Second+500*time.Millisecond, tt.name)
		assert.Less(t, closed, 7*time.Second, tt.name)
	}
}

// TestEventsFromHostileInput: 60 creates with 1 MB names (each refused, 422) store less than
// 1 MB of Events, each named validly; with EVENT_LIMIT=50, 300 Events created by a client
// leave 50 stored, and /events/stats says so.
func TestEventsFromHostileInput(t *testing.T) {
	// Not parallel: measured alone, and kept from starving the timing-bound HA tests.
	p := startBinary(t, shippedBinary(t), "ENABLE_CONTROLLER=false", "EVENT_LIMIT=50")
	base := "http://" + p.addr
	api := base + "/apis/cloudnative.elide.dev/v1/namespaces/default/applications"
	for i := range 60 {
		name := fmt.Sprintf("n%d-", i) + strings.Repeat("x", 1<<20)
		code, _, _ := request.Timed(t, "POST", api, "application/json",
			fmt.Sprintf(`{"apiVersion":"cloudnative.elide.dev/v1","kind":"Application","metadata":{"name":%q},"spec":{"replicas":1,"image":"nginx:1"}}`, name))
		require.Equal(t, http.StatusUnprocessableEntity, code)
	}
	code, body, _ := request.Timed(t, "GET", base+"/api/v1/namespaces/default/events?fieldSelector=reason%3DValidationFailed", "", "")
	require.Equal(t, http.StatusOK, code)
	var list struct {
		Items []struct {
			Metadata struct{ Name string } `json:"metadata"`
			Message  string                `json:"message"`
		} `json:"items"`
	}
	require.NoError(t, json.Unmarshal(body, &list))
	t.Logf("60 rejections of 1 MB names: %d Events, %d bytes in all; RSS %d MB", len(list.Items), len(body), procStatus(t, p, "VmRSS")>>20)
	assert.NotEmpty(t, list.Items, "the rejections are recorded")
	assert.Less(t, len(body), 1<<20, "less than 1 MB of Events")
	for _, it := range list.Items {
		assert.LessOrEqual(t, len(it.Metadata.Name), 253)
		assert.LessOrEqual(t, len(it.Message), 1024)
	}

	for i := range 300 {
		code, _, _ := request.Timed(t, "POST", base+"/api/v1/namespaces/default/events", "application/json",
			fmt.Sprintf(`{"apiVersion":"v1","kind":"Event","metadata":{"name":"client-%d"},"involvedObject":{"kind":"Pod","name":"p"},"reason":"Client","message":"m"}`, i))
		require.Equal(t, http.StatusCreated, code)
	}
	code, body, _ = request.Timed(t, "GET", base+"/api/v1/events", "", "")
	require.Equal(t, http.StatusOK, code)
	var all struct{ Items []any }
	require.NoError(t, json.Unmarshal(body, &all))
	code, body, _ = request.Timed(t, "GET", base+"/events/stats", "", "")
	require.Equal(t, http.StatusOK, code)
	var stats struct{ Total int }
	require.NoError(t, json.Unmarshal(body, &stats))
	t.Logf("300 client Events with EVENT_LIMIT=50: %d stored, /events/stats total %d", len(all.Items), stats.Total)
	assert.Len(t, all.Items, 50)
	assert.Equal(t, 50, stats.Total)
}

// TestWideApplyAndStrategicPatchInTime: a server-side apply of a ConfigMap of 200,000 keys (34 s
// of CPU, then a 504, before the bound), a strategic merge patch of 30,000 env vars into a
// Deployment holding 30,000 (180 s), and writes that would make a managed object as wide, are
// refused up front with a 413 within SPEC's 5 s, peak RSS growing by less than 100 MB, and
// leave what is stored as it was; objects within the bounds are applied and patched.
func TestWideApplyAndStrategicPatchInTime(t *testing.T) {
	// Not parallel: measured alone, and kept from starving the timing-bound HA tests.
	p := startBinary(t, shippedBinary(t), "ENABLE_CONTROLLER=false")
	base := "http://" + p.addr
	cms := base + "/api/v1/namespaces/default/configmaps"
	deploys := base + "/apis/apps/v1/namespaces/default/deployments"
	configMap := func(name string, keys int) string {
		data := make(map[string]string, keys)
		for i := range keys {
			data[fmt.Sprintf("k%d", i)] = "v"
		}
		return request.Body(t, map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": name}, "data": data})
	}
	env := func(from, n int) []map[string]any {
		out := make([]map[string]any, n)
		for i := range out {
			out[i] = map[string]any{"name": fmt.Sprintf("E%d", from+i), "value": "v"}
		}
		return out
	}
	containers := func(env []map[string]any) map[string]any {
		return map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "c", "image": "nginx:1", "env": env}}}}}}
	}
	deployment := func(name string, env []map[string]any) string {
		d := containers(env)
		d["apiVersion"], d["kind"], d["metadata"] = "apps/v1", "Deployment", map[string]any{"name": name}
		spec := d["spec"].(map[string]any)
		spec["selector"] = map[string]any{"matchLabels": map[string]any{"app": name}}
		spec["template"].(map[string]any)["metadata"] = map[string]any{"labels": map[string]any{"app": name}}
		return request.Body(t, d)
	}
	stored := func(url string) string {
		code, body, _ := request.Timed(t, "GET", url, "", "")
		require.Equal(t, http.StatusOK, code)
		return string(body)
	}

	// Stored before the measure: a Deployment of 30,000 env vars (a plain create costs no
	// field management), a managed ConfigMap of 15,000 keys, a Deployment within the bounds.
	for _, tt := range []struct{ url, contentType, body string }{
		{deploys, "application/json", deployment("wide", env(0, 30000))},
		{deploys, "application/json", deployment("narrow", env(0, 1000))},
		{cms + "/managed?fieldManager=m", "application/apply-patch+yaml", configMap("managed", 15000)},
	} {
		method := "POST"
		if tt.contentType == "application/apply-patch+yaml" {
			method = "PATCH"
		}
		code, body, _ := request.Timed(t, method, tt.url, tt.contentType, tt.body)
		require.Equal(t, http.StatusCreated, code, "%.300s", body)
	}
	wideBefore := stored(deploys + "/wide")
	before := procStatus(t, p, "VmHWM")

	more := map[string]any{"data": map[string]any{}}
	for i := range 10000 {
		more["data"].(map[string]any)[fmt.Sprintf("more%d", i)] = "v"
	}
	for _, tt := range []struct {
		name, method, url, contentType, body string
		code                                 int
	}{
		{"server-side apply of a ConfigMap of 200,000 keys", "PATCH", cms + "/big?fieldManager=m", "application/apply-patch+yaml", configMap("big", 200000), http.StatusRequestEntityTooLarge},
		{"strategic merge patch of 30,000 env vars into 30,000", "PATCH", deploys + "/wide", "application/strategic-merge-patch+json", request.Body(t, containers(env(0, 30000))), http.StatusRequestEntityTooLarge},
		{"strategic merge patch of one env var into 30,000", "PATCH", deploys + "/wide", "application/strategic-merge-patch+json", request.Body(t, containers(env(30000, 1))), http.StatusRequestEntityTooLarge},
		{"merge patch of 10,000 keys into a managed ConfigMap of 15,000", "PATCH", cms + "/managed", "application/merge-patch+json", request.Body(t, more), http.StatusRequestEntityTooLarge},
		{"strategic merge patch of 1,000 env vars into 1,000", "PATCH", deploys + "/narrow", "application/strategic-merge-patch+json", request.Body(t, containers(env(500, 1000))), http.StatusOK},
		{"server-side apply of a ConfigMap of 15,000 keys over its own", "PATCH", cms + "/managed?fieldManager=other&force=true", "application/apply-patch+yaml", configMap("managed", 15000), http.StatusOK},
	} {
		code, body, took := request.Timed(t, tt.method, tt.url, tt.contentType, tt.body)
		t.Logf("%s: %d in %v", tt.name, code, took)
		assert.Equal(t, tt.code, code, "%s: %.300s", tt.name, body)
		assert.Less(t, took, 5*time.Second, tt.name)
		if code == http.StatusRequestEntityTooLarge {
			var st map[string]any
			require.NoError(t, json.Unmarshal(body, &st))
			assert.Equal(t, "RequestEntityTooLarge", st["reason"], tt.name)
			assert.Contains(t, st["message"], "too wide", tt.name)
		}
	}
	grew := procStatus(t, p, "VmHWM") - before
	t.Logf("peak RSS grew by %.1f MB over the wide writes", float64(grew)/(1<<20))
	assert.Less(t, grew, int64(100<<20))

	code, _, _ := request.Timed(t, "GET", cms+"/big", "", "")
	assert.Equal(t, http.StatusNotFound, code, "the refused apply created nothing")
	assert.True(t, wideBefore == stored(deploys+"/wide"), "the refused patches left the Deployment as it was")
	var managed struct {
		Metadata struct{ ManagedFields []struct{ Manager string } }
		Data     map[string]string
	}
	require.NoError(t, json.Unmarshal([]byte(stored(cms+"/managed")), &managed))
	assert.Len(t, managed.Data, 15000, "the refused merge patch added nothing")
	var managers []string
	for _, e := range managed.Metadata.ManagedFields {
		managers = append(managers, e.Manager)
	}
	assert.Contains(t, managers, "other", "the apply within the bound took its share of ownership")
}
