package integration

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/yaml"

	"github.com/opemu/opemu/test/internal/request"
)

// Faults as a user meets them (SPEC §16): a client-go informer, a controller-runtime
// reconciler and kubectl, each facing a Fault made with the API.

var faultsGVR = schema.GroupVersionResource{Group: "faults.opemu.dev", Version: "v1", Resource: "faults"}

// createFault creates the Fault name from spec (YAML) and waits until it is Active.
func createFault(t *testing.T, dyn dynamic.Interface, name, spec string) {
	t.Helper()
	var s map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(spec), &s))
	_, err := dyn.Resource(faultsGVR).Create(context.Background(), &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "faults.opemu.dev/v1", "kind": "Fault", "metadata": map[string]any{"name": name}, "spec": s,
	}}, metav1.CreateOptions{})
	require.NoError(t, err)
	waitFault(t, dyn, name, func(st map[string]any) bool { return st["phase"] == "Active" })
}

// waitFault waits until the status of the Fault name satisfies ok, and returns it.
func waitFault(t *testing.T, dyn dynamic.Interface, name string, ok func(st map[string]any) bool) map[string]any {
	t.Helper()
	var st map[string]any
	require.Eventually(t, func() bool {
		f, err := dyn.Resource(faultsGVR).Get(context.Background(), name, metav1.GetOptions{})
		require.NoError(t, err)
		st, _, _ = unstructured.NestedMap(f.Object, "status")
		return ok(st)
	}, 30*time.Second, 20*time.Millisecond, "Fault %s: last status %v", name, st)
	return st
}

func injected(st map[string]any) int64 {
	n, _ := st["injected"].(int64)
	return n
}

// errorCounter counts what a client met: relists of Applications (LISTs, and watches that
// start with initial events, as client-go's watch-list does), and the ERROR events of watch
// streams.
type errorCounter struct {
	next    http.RoundTripper
	relists atomic.Int32
	errors  atomic.Int32
}

func (c *errorCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	q := r.URL.Query()
	if strings.HasSuffix(r.URL.Path, "/applications") && (q.Get("watch") == "" || q.Get("sendInitialEvents") == "true") {
		c.relists.Add(1)
	}
	resp, err := c.next.RoundTrip(r)
	if err == nil && q.Get("watch") != "" {
		resp.Body = &eventScanner{ReadCloser: resp.Body, found: &c.errors}
	}
	return resp, err
}

// eventScanner counts the ERROR events of a Kubernetes watch stream as it is read.
type eventScanner struct {
	io.ReadCloser
	found *atomic.Int32
	line  []byte
}

func (s *eventScanner) Read(p []byte) (int, error) {
	n, err := s.ReadCloser.Read(p)
	for _, b := range p[:n] {
		if b != '\n' {
			s.line = append(s.line, b)
			continue
		}
		if bytes.HasPrefix(s.line, []byte(`{"type":"ERROR"`)) {
			s.found.Add(1)
		}
		s.line = s.line[:0]
	}
	return n, err
}

// TestFaultExpiredWatchesInformer: an informer facing a Fault that ends its watches every 2 s
// with a 410 keeps a store equal to a fresh List while four writers change Applications; it
// relists at most once per injected 410, and every 410 it met is counted in status.injected.
func TestFaultExpiredWatchesInformer(t *testing.T) {
	t.Parallel()
	p := start(t, "ENABLE_CONTROLLER=false")
	writer := p.restConfig()
	writer.WarningHandler = rest.NoWarnings{}
	dyn, err := dynamic.NewForConfig(writer)
	require.NoError(t, err)
	createFault(t, dyn, "expire-watches", `{match: {verbs: [watch], resource: applications}, action: {watch: {closeAfter: 2s, expire: true}}, count: 3}`)

	cfg := p.restConfig()
	cfg.WarningHandler = rest.NoWarnings{}
	counter := &errorCounter{}
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { counter.next = rt; return counter }
	informed, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	apps := dyn.Resource(appsGVR).Namespace("default")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(informed, 0, "default", nil)
	inf := factory.ForResource(appsGVR).Informer()
	factory.Start(ctx.Done())
	require.True(t, cache.WaitForCacheSync(ctx.Done(), inf.HasSynced))

	// Writers run until the Fault has ended three watches.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond):
				}
				name := fmt.Sprintf("w%d-%d", w, i%10)
				obj, err := apps.Get(ctx, name, metav1.GetOptions{})
				switch {
				case apierrors.IsNotFound(err):
					_, err = apps.Create(ctx, appObject(name, 1), metav1.CreateOptions{})
				case err == nil && i%3 == 0:
					err = apps.Delete(ctx, name, metav1.DeleteOptions{})
				case err == nil:
					_ = unstructured.SetNestedField(obj.Object, int64(i%7+1), "spec", "replicas")
					_, err = apps.Update(ctx, obj, metav1.UpdateOptions{})
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	st := waitFault(t, dyn, "expire-watches", func(st map[string]any) bool { return st["phase"] == "Exhausted" })
	close(stop)
	wg.Wait()

	want, err := apps.List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	wantRV := map[string]string{}
	for _, it := range want.Items {
		wantRV[it.GetName()] = it.GetResourceVersion()
	}
	require.Eventually(t, func() bool {
		got := map[string]string{}
		for _, o := range inf.GetStore().List() {
			u := o.(*unstructured.Unstructured)
			got[u.GetName()] = u.GetResourceVersion()
		}
		return assert.ObjectsAreEqual(wantRV, got)
	}, 10*time.Second, 20*time.Millisecond, "the informer equals a fresh List")
	assert.NotEmpty(t, wantRV)
	assert.Equal(t, int64(3), injected(st))
	assert.Equal(t, int32(3), counter.errors.Load(), "the client met every injected 410, and only those")
	assert.LessOrEqual(t, counter.relists.Load(), int32(1+3), "the first list, then at most one relist per 410")
	t.Logf("relists (the first list included): %d; 410s injected: %d", counter.relists.Load(), injected(st))
}

// TestFaultConflictsControllerRuntime: a controller-runtime reconciler that marks
// Applications ready faces a 409 on every third status write; it converges, and the 409s it
// met are the ones counted in status.injected.
func TestFaultConflictsControllerRuntime(t *testing.T) {
	t.Parallel()
	p := start(t, "ENABLE_CONTROLLER=false")
	quiet := p.restConfig()
	quiet.WarningHandler = rest.NoWarnings{}
	dyn, err := dynamic.NewForConfig(quiet)
	require.NoError(t, err)
	createFault(t, dyn, "status-conflicts", `{match: {verbs: [update, patch], resource: applications, subresource: status}, action: {status: 409}, every: 3}`)

	cfg := p.restConfig()
	cfg.WarningHandler = rest.NoWarnings{}
	var injectedSeen, statusWrites atomic.Int32
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(r)
			if err == nil && strings.HasSuffix(r.URL.Path, "/status") {
				statusWrites.Add(1)
				if resp.StatusCode == http.StatusConflict {
					body, _ := io.ReadAll(resp.Body)
					resp.Body = io.NopCloser(bytes.NewReader(body))
					if bytes.Contains(body, []byte(`injected by Fault \"status-conflicts\"`)) {
						injectedSeen.Add(1)
					}
				}
			}
			return resp, err
		})
	}
	log.SetLogger(logr.Discard())
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
	})
	require.NoError(t, err)
	kind := &unstructured.Unstructured{}
	kind.SetGroupVersionKind(schema.GroupVersionKind{Group: "cloudnative.elide.dev", Version: "v1", Kind: "Application"})
	c := mgr.GetClient()
	var reconciles atomic.Int32
	skip := true // -count=N runs the test again in this process
	err = ctrl.NewControllerManagedBy(mgr).For(kind).Named("ready-maker").WithOptions(controller.Options{SkipNameValidation: &skip}).Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		reconciles.Add(1)
		obj := kind.DeepCopy()
		if err := c.Get(ctx, req.NamespacedName, obj); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
		replicas, _, _ := unstructured.NestedInt64(obj.Object, "spec", "replicas")
		phase, _, _ := unstructured.NestedString(obj.Object, "status", "phase")
		if phase == "Running" {
			return reconcile.Result{}, nil
		}
		_ = unstructured.SetNestedMap(obj.Object, map[string]any{"phase": "Running", "readyReplicas": replicas, "observedGeneration": obj.GetGeneration()}, "status")
		return reconcile.Result{}, c.Status().Update(ctx, obj) // a conflict requeues the key
	}))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() { cancel(); require.NoError(t, <-done) }()

	apps := dyn.Resource(appsGVR).Namespace("default")
	const n = 9
	for i := range n {
		_, err := apps.Create(ctx, appObject(fmt.Sprint("cr-", i), int64(i+1)), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		l, err := apps.List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		running := 0
		for _, it := range l.Items {
			phase, _, _ := unstructured.NestedString(it.Object, "status", "phase")
			ready, _, _ := unstructured.NestedInt64(it.Object, "status", "readyReplicas")
			replicas, _, _ := unstructured.NestedInt64(it.Object, "spec", "replicas")
			if phase == "Running" && ready == replicas {
				running++
			}
		}
		return running == n
	}, 30*time.Second, 20*time.Millisecond, "every Application converges")
	st := waitFault(t, dyn, "status-conflicts", func(st map[string]any) bool { return injected(st) == int64(injectedSeen.Load()) })
	assert.GreaterOrEqual(t, injected(st), int64(n/3), "one status write in three was refused")
	assert.GreaterOrEqual(t, statusWrites.Load(), int32(n+n/3))
	t.Logf("status writes: %d, injected 409s: %d, reconciles: %d", statusWrites.Load(), injected(st), reconciles.Load())
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestFaultThrottleKubectl: kubectl facing 429 with Retry-After: 1 (examples/faults) waits,
// retries and succeeds; each 429 it met is counted; nothing stored changed.
func TestFaultThrottleKubectl(t *testing.T) {
	t.Parallel()
	p := start(t, "ENABLE_CONTROLLER=false")
	k := p.kubectl(t)
	k.Run("create", "-f", "examples/application.yaml")
	// Every example of examples/faults is a valid Fault.
	dry := k.Run("apply", "--dry-run=server", "-f", "examples/faults/")
	assert.Equal(t, 4, strings.Count(dry, "(server dry run)"), "%s", dry)
	before := k.Run("get", "applications", "-o", "jsonpath={.items[*].metadata.resourceVersion}")
	assert.Contains(t, k.Run("apply", "-f", "examples/faults/throttle-lists.yaml"), "fault.faults.opemu.dev/throttle-lists created")
	dyn, err := dynamic.NewForConfig(p.restConfig())
	require.NoError(t, err)
	waitFault(t, dyn, "throttle-lists", func(st map[string]any) bool { return st["phase"] == "Active" })

	start := time.Now()
	out := k.Run("get", "applications", "-v=6")
	elapsed := time.Since(start)
	assert.Equal(t, 2, strings.Count(out, " 429 Too Many Requests"), "two throttled lists:\n%s", out)
	assert.Contains(t, out, "demo")
	assert.GreaterOrEqual(t, elapsed, 2*time.Second, "Retry-After: 1 honoured twice")
	st := waitFault(t, dyn, "throttle-lists", func(st map[string]any) bool { return st["phase"] == "Exhausted" })
	assert.Equal(t, int64(2), injected(st))
	assert.Equal(t, before, k.Run("get", "applications", "-o", "jsonpath={.items[*].metadata.resourceVersion}"))
	assert.Contains(t, k.Run("get", "faults"), "throttle-lists")
	k.Run("delete", "fault", "throttle-lists")
}

// TestFaultsSpareTheController: a Fault that answers 503 to every request does not touch
// opemu's own controller and recorder (they do not go through HTTP): an Application rolls out
// to Running behind it, and the Fault counts only the client's refused request.
func TestFaultsSpareTheController(t *testing.T) {
	t.Parallel()
	p := start(t, "ROLLOUT_STEP=100ms", "ENABLE_LEADER_ELECTION=false")
	base := "http://" + p.addr
	api := base + "/apis/cloudnative.elide.dev/v1/namespaces/default/applications"
	code, _ := request.JSON(t, "POST", base+"/apis/faults.opemu.dev/v1/faults", `{"apiVersion":"faults.opemu.dev/v1","kind":"Fault",
		"metadata":{"name":"everything"},"spec":{"action":{"status":503}}}`)
	require.Equal(t, http.StatusCreated, code)
	require.Eventually(t, func() bool {
		st, _ := request.Get(t, base+"/apis/faults.opemu.dev/v1/faults/everything")["status"].(map[string]any)
		return st["phase"] == "Active"
	}, 5*time.Second, 10*time.Millisecond)
	code, m := request.JSON(t, "POST", api, request.AppJSON)
	require.Equal(t, http.StatusServiceUnavailable, code, "%v", m)

	// Let creates through (the new spec is applied once observedGeneration says so); every
	// other client request stays refused.
	code, m = request.JSON(t, "PUT", base+"/apis/faults.opemu.dev/v1/faults/everything", `{"apiVersion":"faults.opemu.dev/v1","kind":"Fault",
		"metadata":{"name":"everything"},"spec":{"match":{"verbs":["get","list","watch","update","patch","delete","deletecollection"]},"action":{"status":503}}}`)
	require.Equal(t, http.StatusOK, code, "%v", m)
	waitFaultHTTP(t, base, "everything", func(st map[string]any) bool { return st["observedGeneration"] == float64(2) })
	code, m = request.JSON(t, "POST", api, request.AppJSON)
	require.Equal(t, http.StatusCreated, code, "%v", m)
	// Reads of Applications are refused; the operator's own record says what it did.
	require.Eventually(t, func() bool {
		evs, _ := request.Get(t, base+"/events?name=web&reason=Ready")["events"].([]any)
		return len(evs) == 1
	}, 10*time.Second, 20*time.Millisecond, "the controller rolled the Application out")
	code, _ = request.JSON(t, "GET", api+"/web", "")
	assert.Equal(t, http.StatusServiceUnavailable, code, "while clients are refused")
	// The Ready Event may be stored before the status write that goes with it is in the history.
	require.Eventually(t, func() bool {
		h := request.History(t, api, "web")
		return h[len(h)-1].(map[string]any)["phase"] == "Running"
	}, 10*time.Second, 20*time.Millisecond, "the history ends Running")
	st := waitFaultHTTP(t, base, "everything", func(st map[string]any) bool { return st["injected"] == float64(2) })
	assert.Equal(t, "Active", st["phase"], "two refused client requests, none of the controller's writes")
}

// waitFaultHTTP waits until the status of the Fault name satisfies ok, over plain HTTP.
func waitFaultHTTP(t *testing.T, base, name string, ok func(map[string]any) bool) map[string]any {
	t.Helper()
	var st map[string]any
	require.Eventually(t, func() bool {
		st, _ = request.Get(t, base+"/apis/faults.opemu.dev/v1/faults/"+name)["status"].(map[string]any)
		return ok(st)
	}, 5*time.Second, 10*time.Millisecond, "Fault %s: last status %v", name, st)
	return st
}
