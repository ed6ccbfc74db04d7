package server_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// serve runs one request through the server's handler, without a network, and returns the
// status code.
func (e *env) serve(method, path, contentType, body string) int {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	w := httptest.NewRecorder()
	e.srv.Handler().ServeHTTP(w, req)
	return w.Code
}

// BenchmarkAPIPath is the full write and read path of SPEC §10's API-path target (admission,
// schema, store, watch fan-out, the Created and Updated Events) through the HTTP handler,
// without the network: what one request costs the server.
func BenchmarkAPIPath(b *testing.B) {
	e := newEnv(b)
	body := func(name string, replicas int) string {
		return fmt.Sprintf(`{"apiVersion":"cloudnative.elide.dev/v1","kind":"Application","metadata":{"name":%q},"spec":{"replicas":%d,"image":"nginx:1.27"}}`, name, replicas)
	}
	const seeded = 1000
	for i := range seeded {
		if code := e.serve("POST", appsPath, "application/json", body(fmt.Sprint("seed-", i), 1)); code != http.StatusCreated {
			b.Fatalf("seed create: %d", code)
		}
	}
	// A built-in kind's list leaves out each item's apiVersion and kind (its own path).
	const cms = "/api/v1/namespaces/bench/configmaps"
	e.namespaces("bench")
	for i := range 100 {
		cm := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-%d","labels":{"app":"web"}},"data":{"key":"value-%d","other":"more"}}`, i, i)
		if code := e.serve("POST", cms, "application/json", cm); code != http.StatusCreated {
			b.Fatalf("seed configmap: %d", code)
		}
	}
	// Each scenario's i-th request: creates of new objects, gets and updates of seeded ones,
	// lists of the seeded ones.
	scenarios := []struct {
		name    string
		request func(i int) (method, path, body string)
		want    int
	}{
		{"create", func(i int) (string, string, string) {
			return "POST", appsPath, body(fmt.Sprint("c-", i), 3)
		}, http.StatusCreated},
		{"get", func(i int) (string, string, string) {
			return "GET", fmt.Sprintf("%s/seed-%d", appsPath, i%seeded), ""
		}, http.StatusOK},
		{"update", func(i int) (string, string, string) {
			name := fmt.Sprint("seed-", i%seeded)
			return "PUT", appsPath + "/" + name, body(name, 1+i%5)
		}, http.StatusOK},
		{"list-1000-applications", func(int) (string, string, string) { return "GET", appsPath, "" }, http.StatusOK},
		{"list-100-configmaps", func(int) (string, string, string) { return "GET", cms, "" }, http.StatusOK},
	}
	for _, sc := range scenarios {
		b.Run(sc.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				method, path, reqBody := sc.request(i)
				ctype := ""
				if reqBody != "" {
					ctype = "application/json"
				}
				if code := e.serve(method, path, ctype, reqBody); code != sc.want {
					b.Fatalf("%s: %d", sc.name, code)
				}
			}
		})
	}
}
