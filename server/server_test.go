package server_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/opemu/opemu/app/apptest"
	"github.com/opemu/opemu/application"
	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/events"
	"github.com/opemu/opemu/faults"
	"github.com/opemu/opemu/metrics"
	"github.com/opemu/opemu/registry"
	"github.com/opemu/opemu/registry/registrytest"
	"github.com/opemu/opemu/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// env is one server under test, reached over real HTTP.
type env struct {
	t       testing.TB
	store   cache.Interface
	metrics *metrics.Registry
	srv     *server.Server
	http    *httptest.Server
}

const appsPath = "/apis/cloudnative.elide.dev/v1/namespaces/default/applications"

// newEnv serves the standard core (apptest) over HTTP; tweak may change the server's and
// the store's configuration first (the server's Admission replaces the Application chain).
func newEnv(t testing.TB, tweak ...func(*server.Config, *cache.Config)) *env {
	t.Helper()
	return newEnvWithEventLimit(t, 0, tweak...)
}

// newEnvWithEventLimit is newEnv whose store keeps at most limit Events (EVENT_LIMIT over the
// in-memory store; 0: the default), counting those clients create, as the binary wires it.
func newEnvWithEventLimit(t testing.TB, limit int, tweak ...func(*server.Config, *cache.Config)) *env {
	t.Helper()
	return newEnvOn(t, nil, limit, tweak...)
}

// newEnvOn is newEnvWithEventLimit over storage (nil: a new cache.Store).
func newEnvOn(t testing.TB, storage cache.Interface, limit int, tweak ...func(*server.Config, *cache.Config)) *env {
	t.Helper()
	cfg := server.Config{}
	scfg := cache.Config{}
	for _, f := range tweak {
		f(&cfg, &scfg)
	}
	reg := metrics.New()
	var recorder *events.Recorder
	core := apptest.New(t, apptest.Options{Options: registrytest.Options{
		Storage: storage, Store: scfg, Admission: cfg.Admission, EventLimit: cmp.Or(limit, events.DefaultLimit), Calls: cfg.Calls,
		Events: func(c *registry.Client) registry.EventRecorder {
			recorder = events.New(events.Config{Client: c, Host: "test", Metrics: reg})
			return recorder
		},
	}, Metrics: reg})
	cfg.Registry, cfg.Kinds, cfg.CRDs, cfg.Admission = core.Registry, core.Kinds, core.CRDs, core.Admission
	cfg.Events, cfg.Metrics, cfg.PrimaryCRD = recorder, reg, application.CRDName
	engine, err := faults.New(faults.Config{Client: core.Registry.Client("opemu-faults"), Metrics: reg})
	require.NoError(t, err)
	cfg.Faults = engine
	runCtx, stopFaults := context.WithCancel(context.Background())
	faultsDone := make(chan struct{})
	go func() { _ = engine.Run(runCtx); close(faultsDone) }()
	srv, err := server.New(cfg)
	require.NoError(t, err)
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		srv.BeginShutdown()
		hs.Close()
		stopFaults()
		<-faultsDone
	})
	return &env{t: t, store: core.Storage, metrics: reg, srv: srv, http: hs}
}

// response is a finished HTTP exchange.
type response struct {
	code   int
	header http.Header
	body   []byte
}

func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(r.body, &m), "body: %s", r.body)
	return m
}

func (e *env) do(method, path, contentType, body string) response {
	e.t.Helper()
	req, err := http.NewRequest(method, e.http.URL+path, strings.NewReader(body))
	require.NoError(e.t, err)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := e.http.Client().Do(req)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(e.t, err)
	return response{code: resp.StatusCode, header: resp.Header, body: b}
}

// namespaces creates the namespaces names, as a client does on a cluster before it writes into
// them.
func (e *env) namespaces(names ...string) {
	e.t.Helper()
	for _, name := range names {
		r := e.do("POST", "/api/v1/namespaces", "application/json", `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"`+name+`"}}`)
		require.Equal(e.t, http.StatusCreated, r.code, "body: %s", r.body)
	}
}

func app(name string, replicas any, image string) string {
	spec := map[string]any{"replicas": replicas}
	if image != "" {
		spec["image"] = image
	}
	b, _ := json.Marshal(map[string]any{
		"apiVersion": "cloudnative.elide.dev/v1",
		"kind":       "Application",
		"metadata":   map[string]any{"name": name},
		"spec":       spec,
	})
	return string(b)
}

// status asserts r is a Kubernetes Status failure with code and reason.
func status(t *testing.T, r response, code int, reason string) map[string]any {
	t.Helper()
	require.Equal(t, code, r.code, "body: %s", r.body)
	m := r.json(t)
	assert.Equal(t, "Status", m["kind"])
	assert.Equal(t, "v1", m["apiVersion"])
	assert.Equal(t, "Failure", m["status"])
	if reason == "" {
		assert.NotContains(t, m, "reason")
	} else {
		assert.Equal(t, reason, m["reason"])
	}
	assert.EqualValues(t, code, m["code"])
	assert.NotEmpty(t, m["message"])
	return m
}

func causes(m map[string]any) []string {
	d, _ := m["details"].(map[string]any)
	cs, _ := d["causes"].([]any)
	var fields []string
	for _, c := range cs {
		fields = append(fields, c.(map[string]any)["field"].(string))
	}
	return fields
}

func field(m map[string]any, path ...string) any {
	var cur any = m
	for _, p := range path {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = mm[p]
	}
	return cur
}

var jsonMarshal = json.Marshal

func compact(t *testing.T, b []byte) string {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, json.Compact(&buf, b))
	return buf.String()
}

func errorsAs(err error, target any) bool { return errors.As(err, target) }
