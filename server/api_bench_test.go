package server_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/calls"
	"github.com/opemu/opemu/events"
	"github.com/opemu/opemu/server"
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
	apiPath(b, newEnv(b))
}

// BenchmarkAPIPathRecord is BenchmarkAPIPath with the record of calls on, as the binary runs
// by default (CALL_HISTORY): compare the two for its cost (SPEC §21: at most 5%).
func BenchmarkAPIPathRecord(b *testing.B) {
	apiPath(b, newEnv(b, func(c *server.Config, _ *cache.Config) { c.Calls = calls.New(calls.Config{}) }))
}

// apiPath runs the API path's scenarios on e.
func apiPath(b *testing.B, e *env) {
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
	// Each scenario's i-th request: creates of new objects, gets, updates and server-side
	// applies (forced: the seeds' creator owns spec.replicas) of seeded ones, lists of the
	// seeded ones.
	scenarios := []struct {
		name    string
		request func(i int) (method, path, body string)
		want    int
		ctype   string // of the body; "" is JSON
	}{
		{"create", func(i int) (string, string, string) {
			return "POST", appsPath, body(fmt.Sprint("c-", i), 3)
		}, http.StatusCreated, ""},
		{"get", func(i int) (string, string, string) {
			return "GET", fmt.Sprintf("%s/seed-%d", appsPath, i%seeded), ""
		}, http.StatusOK, ""},
		{"update", func(i int) (string, string, string) {
			name := fmt.Sprint("seed-", i%seeded)
			return "PUT", appsPath + "/" + name, body(name, 1+i%5)
		}, http.StatusOK, ""},
		{"patch-merge", func(i int) (string, string, string) {
			return "PATCH", fmt.Sprintf("%s/seed-%d", appsPath, i%seeded), fmt.Sprintf(`{"spec":{"replicas":%d}}`, 1+i%5)
		}, http.StatusOK, "application/merge-patch+json"},
		{"patch-json", func(i int) (string, string, string) {
			return "PATCH", fmt.Sprintf("%s/seed-%d", appsPath, i%seeded), fmt.Sprintf(`[{"op":"replace","path":"/spec/replicas","value":%d}]`, 1+i%5)
		}, http.StatusOK, "application/json-patch+json"},
		{"apply", func(i int) (string, string, string) {
			name := fmt.Sprint("seed-", i%seeded)
			return "PATCH", appsPath + "/" + name + "?fieldManager=bench&force=true", body(name, 1+i%5)
		}, http.StatusOK, "application/apply-patch+yaml"},
		{"list-1000-applications", func(int) (string, string, string) { return "GET", appsPath, "" }, http.StatusOK, ""},
		{"list-100-configmaps", func(int) (string, string, string) { return "GET", cms, "" }, http.StatusOK, ""},
	}
	for _, sc := range scenarios {
		b.Run(sc.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				method, path, reqBody := sc.request(i)
				ctype := sc.ctype
				if reqBody != "" && ctype == "" {
					ctype = "application/json"
				}
				if code := e.serve(method, path, ctype, reqBody); code != sc.want {
					b.Fatalf("%s: %d", sc.name, code)
				}
			}
		})
	}
}

// BenchmarkRecordCost is the record's A/B on a loaded machine: two servers, the record off
// and on, take turns at short rounds of the same requests (the order alternating), and the
// medians of the rounds' ratios (on/off) are reported, which load that drifts over seconds
// cancels out of: of wall time ("on/off") and of the process's CPU time ("cpu-on/off", which
// other processes' load disturbs less; it includes the garbage collector's work on the other
// cores). b.N is the rounds; each is 200 requests per server.
func BenchmarkRecordCost(b *testing.B) {
	off := newEnv(b)
	on := newEnv(b, func(c *server.Config, _ *cache.Config) { c.Calls = calls.New(calls.Config{}) })
	app := func(name string, replicas int) string {
		return fmt.Sprintf(`{"apiVersion":"cloudnative.elide.dev/v1","kind":"Application","metadata":{"name":%q},"spec":{"replicas":%d,"image":"nginx:1.27"}}`, name, replicas)
	}
	for _, e := range []*env{off, on} {
		for i := range 200 {
			if code := e.serve("POST", appsPath, "application/json", app(fmt.Sprint("seed-", i), 1)); code != http.StatusCreated {
				b.Fatalf("seed create: %d", code)
			}
		}
	}
	const perRound = 200
	scenarios := []struct {
		name string
		run  func(e *env, round, i int) int
		want int
	}{
		{"create", func(e *env, round, i int) int {
			return e.serve("POST", appsPath, "application/json", app(fmt.Sprintf("c-%d-%d", round, i), 3))
		}, http.StatusCreated},
		{"get", func(e *env, _, i int) int { return e.serve("GET", fmt.Sprintf("%s/seed-%d", appsPath, i), "", "") }, http.StatusOK},
		{"update", func(e *env, round, i int) int {
			name := fmt.Sprint("seed-", i)
			return e.serve("PUT", appsPath+"/"+name, "application/json", app(name, 1+(round+i)%5))
		}, http.StatusOK},
	}
	runs := 0 // each run of a scenario creates names of its own
	for _, sc := range scenarios {
		b.Run(sc.name, func(b *testing.B) {
			var ratios, cpuRatios []float64
			runs++
			round := runs * 1_000_000
			for b.Loop() {
				round++
				var took, cpu [2]time.Duration
				order := []int{0, 1}
				if round%2 == 0 {
					order = []int{1, 0}
				}
				for _, which := range order {
					e := []*env{off, on}[which]
					start, startCPU := time.Now(), processCPU(b)
					for i := range perRound {
						if code := sc.run(e, round, i); code != sc.want {
							b.Fatalf("%s: %d", sc.name, code)
						}
					}
					took[which], cpu[which] = time.Since(start), processCPU(b)-startCPU
				}
				ratios = append(ratios, float64(took[1])/float64(took[0]))
				cpuRatios = append(cpuRatios, float64(cpu[1])/float64(cpu[0]))
			}
			b.ReportMetric(median(ratios), "on/off")
			b.ReportMetric(median(cpuRatios), "cpu-on/off")
		})
	}
}

// median is the middle of xs (which it sorts).
func median(xs []float64) float64 {
	slices.Sort(xs)
	return xs[len(xs)/2]
}

// processCPU is the CPU time the process has used, user and system.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkAPIPathSpread is the API path as the load tool drives it (examples/load, -mode=api):
// writes and reads spread over more objects than the recorder aggregates Events for, so every
// write records a new Event, and more Events than EVENT_LIMIT keeps, so each of those evicts
// the oldest; with the record of calls on, as the binary runs. Besides ns/op it reports the
// process's CPU per request ("cpu-µs/op", the collector's work on other cores included), which
// a shared machine disturbs less than wall time.
func BenchmarkAPIPathSpread(b *testing.B) {
	e := newEnv(b, func(c *server.Config, _ *cache.Config) { c.Calls = calls.New(calls.Config{}) })
	body := func(name string, replicas int) string {
		return fmt.Sprintf(`{"apiVersion":"cloudnative.elide.dev/v1","kind":"Application","metadata":{"name":%q},"spec":{"replicas":%d,"image":"nginx:1.27"}}`, name, replicas)
	}
	const seeded = 2 * events.DefaultLimit
	for i := range seeded {
		if code := e.serve("POST", appsPath, "application/json", body(fmt.Sprint("seed-", i), 1)); code != http.StatusCreated {
			b.Fatalf("seed create: %d", code)
		}
	}
	next := 0 // the seed the next write or read takes, on across scenarios as the load tool's phases
	scenarios := []struct {
		name    string
		request func(i, seed int) (method, path, body string)
		want    int
		ctype   string // of the body; "" is JSON
	}{
		{"create", func(i, _ int) (string, string, string) {
			return "POST", appsPath, body(fmt.Sprint("c-", i), 3)
		}, http.StatusCreated, ""},
		{"get", func(_, seed int) (string, string, string) {
			return "GET", fmt.Sprintf("%s/seed-%d", appsPath, seed), ""
		}, http.StatusOK, ""},
		{"update", func(i, seed int) (string, string, string) {
			name := fmt.Sprint("seed-", seed)
			return "PUT", appsPath + "/" + name, body(name, 2+i%5)
		}, http.StatusOK, ""},
		{"patch-merge", func(i, seed int) (string, string, string) {
			return "PATCH", fmt.Sprintf("%s/seed-%d", appsPath, seed), fmt.Sprintf(`{"spec":{"replicas":%d}}`, 2+i%5)
		}, http.StatusOK, "application/merge-patch+json"},
	}
	for _, sc := range scenarios {
		b.Run(sc.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			startCPU := processCPU(b)
			for b.Loop() {
				i++
				next = (next + 1) % seeded
				method, path, reqBody := sc.request(i, next)
				ctype := sc.ctype
				if reqBody != "" && ctype == "" {
					ctype = "application/json"
				}
				if code := e.serve(method, path, ctype, reqBody); code != sc.want {
					b.Fatalf("%s: %d", sc.name, code)
				}
			}
			b.ReportMetric(float64((processCPU(b)-startCPU).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}
