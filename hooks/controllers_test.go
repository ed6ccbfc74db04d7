package hooks_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opemu/opemu/app/apptest"
	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/events"
	"github.com/opemu/opemu/hooks"
	"github.com/opemu/opemu/reconciler"
	"github.com/opemu/opemu/registry"
	"github.com/opemu/opemu/registry/registrytest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// recorder keeps Events in memory.
type recorder struct {
	mu  sync.Mutex
	evs []events.Event
}

func (r *recorder) Record(_ context.Context, ev events.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evs = append(r.evs, ev)
}

// find returns the events of name with reason.
func (r *recorder) find(name, reason string) []events.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []events.Event
	for _, e := range r.evs {
		if e.Object.Name == name && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

const widgetCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.test.opemu.dev}
spec:
  group: test.opemu.dev
  scope: Namespaced
  names: {kind: Widget, listKind: WidgetList, plural: widgets, singular: widget}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer, maximum: 10}
          status:
            type: object
            properties:
              phase: {type: string, enum: [Pending, Ready, Deleting]}
              size: {type: integer}
              conditions:
                type: array
                items:
                  type: object
                  properties:
                    type: {type: string}
                    status: {type: string}
                    reason: {type: string}
                    message: {type: string}
                    lastTransitionTime: {type: string}
                    observedGeneration: {type: integer}
`

var (
	widgets    = cache.GroupResource{Group: "test.opemu.dev", Resource: "widgets"}
	configMaps = cache.GroupResource{Resource: "configmaps"}
	crds       = cache.GroupResource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}
)

// hookFunc answers one hook call (status code and body).
type hookFunc func(req map[string]any) (int, any)

// hookServer serves a reconcile hook whose behaviour the test may change, and counts calls.
type hookServer struct {
	*httptest.Server
	calls atomic.Int64
	mu    sync.Mutex
	fn    hookFunc
	seen  []map[string]any
}

func newHook(t *testing.T, fn hookFunc) *hookServer {
	h := &hookServer{fn: fn}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.calls.Add(1)
		body, _ := io.ReadAll(r.Body)
		var req map[string]any
		_ = json.Unmarshal(body, &req)
		h.mu.Lock()
		fn := h.fn
		h.seen = append(h.seen, req)
		h.mu.Unlock()
		code, ans := fn(req)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		if s, ok := ans.(string); ok {
			_, _ = io.WriteString(w, s)
			return
		}
		_ = json.NewEncoder(w).Encode(ans)
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *hookServer) set(fn hookFunc) {
	h.mu.Lock()
	h.fn = fn
	h.mu.Unlock()
}

// last returns the last request the hook got.
func (h *hookServer) last() map[string]any {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.seen) == 0 {
		return nil
	}
	return h.seen[len(h.seen)-1]
}

// calledFor reports whether the hook was called for an object named name.
func (h *hookServer) calledFor(name string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, req := range h.seen {
		obj, _ := req["object"].(map[string]any)
		md, _ := obj["metadata"].(map[string]any)
		if md["name"] == name {
			return true
		}
	}
	return false
}

// readyHook is a small hook: a ConfigMap child with the widget's size, phase Ready, an event.
func readyHook(req map[string]any) (int, any) {
	obj := req["object"].(map[string]any)
	md := obj["metadata"].(map[string]any)
	spec, _ := obj["spec"].(map[string]any)
	if req["finalizing"] == true {
		return 200, map[string]any{"finalized": true}
	}
	return 200, map[string]any{
		"status": map[string]any{"phase": "Ready", "size": spec["size"]},
		"children": []any{map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": md["name"].(string) + "-config"},
			"data":     map[string]any{"size": fmt.Sprint(spec["size"])},
		}},
		"events": []any{map[string]any{"reason": "Synced", "message": "configured"}},
	}
}

// rig is a core (apptest), a hooks.Manager leading, and an event recorder.
type rig struct {
	env    *registrytest.Env
	client *registry.Client
	events *recorder
	mgr    *hooks.Manager
}

func newRig(t *testing.T) *rig {
	t.Helper()
	env := apptest.New(t, apptest.Options{})
	r := &rig{env: env, client: env.Registry.Client("test"), events: &recorder{}}
	r.create(t, crds, "", yamlObj(t, widgetCRD))
	// The first server-side apply in a process parses client-go's schema of the built-in kinds
	// (kinds/smd.go): half a second, 3 to 4 s under -race on a loaded 2-core machine, which
	// the two tests waiting on it at once each counted in their 5 s for a first reconcile.
	// Paid here, the tests' bounds time what they claim (the hooks' children are ConfigMaps
	// applied server-side).
	warm := cache.Key{Resource: configMaps.Resource, Namespace: "default", Name: "rig-warm-up"}
	_, err := r.client.Apply(context.Background(), warm, map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": warm.Name, "namespace": warm.Namespace}})
	require.NoError(t, err)
	_, _, err = r.client.Delete(context.Background(), warm, cache.Preconditions{})
	require.NoError(t, err)
	r.mgr, err = hooks.NewManager(hooks.Config{
		Clients: func(m string) hooks.Client { return env.Registry.Client(m) },
		Kinds:   env.Kinds, Events: r.events, Reserved: []string{"application"},
		Tuning: reconciler.Tuning{BackoffBase: 20 * time.Millisecond, BackoffMax: 80 * time.Millisecond, MaxRetries: 50},
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = r.mgr.Run(ctx) })
	wg.Go(func() { _ = r.mgr.Lead(ctx) })
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	return r
}

func yamlObj(t *testing.T, y string) map[string]any {
	t.Helper()
	js, err := yaml.YAMLToJSON([]byte(y))
	require.NoError(t, err)
	obj, err := registry.DecodeObject(js)
	require.NoError(t, err)
	return obj
}

func (r *rig) create(t *testing.T, gr cache.GroupResource, ns string, obj map[string]any) *cache.Object {
	t.Helper()
	md := obj["metadata"].(map[string]any)
	o, err := r.client.Create(context.Background(), cache.Key{Group: gr.Group, Resource: gr.Resource, Namespace: ns, Name: md["name"].(string)}, obj)
	require.NoError(t, err)
	return o
}

// controller creates a Controller of widgets calling url.
func (r *rig) controller(t *testing.T, name, url string, extra map[string]any) {
	t.Helper()
	spec := map[string]any{
		"resource": map[string]any{"group": "test.opemu.dev", "version": "v1", "plural": "widgets"},
		"hook":     map[string]any{"url": url, "timeoutSeconds": json.Number("1")},
		"children": []any{map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}},
	}
	for k, v := range extra {
		spec[k] = v
	}
	r.create(t, hooks.Resource, "", map[string]any{"apiVersion": "controllers.opemu.dev/v1", "kind": "Controller", "metadata": map[string]any{"name": name}, "spec": spec})
}

func (r *rig) widget(t *testing.T, name string, size int) {
	t.Helper()
	r.create(t, widgets, "default", map[string]any{"apiVersion": "test.opemu.dev/v1", "kind": "Widget",
		"metadata": map[string]any{"name": name}, "spec": map[string]any{"size": json.Number(fmt.Sprint(size))}})
}

func (r *rig) get(t *testing.T, gr cache.GroupResource, ns, name string) map[string]any {
	t.Helper()
	o, err := r.client.Get(context.Background(), cache.Key{Group: gr.Group, Resource: gr.Resource, Namespace: ns, Name: name})
	if err != nil {
		return nil
	}
	doc, err := o.Decode()
	require.NoError(t, err)
	return doc
}

// condition returns the status condition typ of obj (nil when none).
func condition(obj map[string]any, typ string) map[string]any {
	st, _ := obj["status"].(map[string]any)
	l, _ := st["conditions"].([]any)
	for _, c := range l {
		if m := c.(map[string]any); m["type"] == typ {
			return m
		}
	}
	return nil
}

func phase(obj map[string]any) any {
	st, _ := obj["status"].(map[string]any)
	return st["phase"]
}

func TestHookReconciles(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	hook := newHook(t, readyHook)
	r.controller(t, "widgets", hook.URL, nil)
	r.widget(t, "w1", 3)

	require.Eventually(t, func() bool { return phase(r.get(t, widgets, "default", "w1")) == "Ready" }, 5*time.Second, 10*time.Millisecond)
	w := r.get(t, widgets, "default", "w1")
	synced := condition(w, "Synced")
	require.NotNil(t, synced, "opemu keeps a Synced condition: %v", w["status"])
	assert.Equal(t, "True", synced["status"])
	assert.Equal(t, json.Number("3"), w["status"].(map[string]any)["size"])

	cm := r.get(t, configMaps, "default", "w1-config")
	require.NotNil(t, cm, "the child exists")
	assert.Equal(t, map[string]any{"size": "3"}, cm["data"])
	refs := cm["metadata"].(map[string]any)["ownerReferences"].([]any)
	require.Len(t, refs, 1)
	ref := refs[0].(map[string]any)
	assert.Equal(t, "test.opemu.dev/v1", ref["apiVersion"])
	assert.Equal(t, "Widget", ref["kind"])
	assert.Equal(t, "w1", ref["name"])
	assert.Equal(t, w["metadata"].(map[string]any)["uid"], ref["uid"])
	assert.Equal(t, true, ref["controller"])
	assert.NotEmpty(t, r.events.find("w1", "Synced"), "the hook's event is recorded")
	assert.Equal(t, "widgets", r.events.find("w1", "Synced")[0].Source)

	// The request: the object, its children by kind and name, attempt 1.
	req := hook.last()
	assert.Equal(t, "widgets", req["controller"])
	assert.Equal(t, 1.0, req["attempt"])
	assert.Equal(t, false, req["finalizing"])
	assert.Contains(t, req["children"], "ConfigMap.v1")

	// A spec change re-syncs: the child follows.
	cur := r.get(t, widgets, "default", "w1")
	cur["spec"] = map[string]any{"size": json.Number("5")}
	_, err := r.client.Update(context.Background(), cache.Key{Group: widgets.Group, Resource: widgets.Resource, Namespace: "default", Name: "w1"}, cur)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		cm := r.get(t, configMaps, "default", "w1-config")
		return cm != nil && cm["data"].(map[string]any)["size"] == "5"
	}, 5*time.Second, 10*time.Millisecond)

	// A child deleted by hand is put back at once (children are watched).
	_, _, err = r.client.Delete(context.Background(), cache.Key{Resource: "configmaps", Namespace: "default", Name: "w1-config"}, cache.Preconditions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return r.get(t, configMaps, "default", "w1-config") != nil }, 5*time.Second, 10*time.Millisecond)

	// An answer without the child deletes it.
	hook.set(func(req map[string]any) (int, any) {
		return 200, map[string]any{"status": map[string]any{"phase": "Pending"}, "children": []any{}}
	})
	cur = r.get(t, widgets, "default", "w1")
	cur["spec"] = map[string]any{"size": json.Number("6")}
	_, err = r.client.Update(context.Background(), cache.Key{Group: widgets.Group, Resource: widgets.Resource, Namespace: "default", Name: "w1"}, cur)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return r.get(t, configMaps, "default", "w1-config") == nil }, 5*time.Second, 10*time.Millisecond)

	h, ok := r.mgr.History(cache.Key{Group: widgets.Group, Resource: widgets.Resource, Namespace: "default", Name: "w1"})
	require.True(t, ok)
	require.NotEmpty(t, h)
	assert.Equal(t, "widgets", h[0].Controller)
	assert.True(t, h[0].Success)
}

// TestHookContainment: a hook that fails in any way gets a failed reconcile (a Synced=False
// condition with the cause, a ReconcileError event, retries with backoff), never a stuck
// queue: another widget of the same controller is reconciled meanwhile.
func TestHookContainment(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		fn   hookFunc
		want string // in the condition's message
	}{
		// What the hook says is never echoed (secret): the hook's URL may reach any service.
		{"HTTP 500", func(map[string]any) (int, any) { return 500, "database on fire " + secret }, "HTTP 500 Internal Server Error"},
		{"hangs", func(map[string]any) (int, any) { time.Sleep(1500 * time.Millisecond); return 200, "{}" }, "no answer within 1s (spec.hook.timeoutSeconds)"},
		{"garbage", func(map[string]any) (int, any) { return 200, "<html>" + secret + "</html>" }, "the hook's answer is not valid: not JSON"},
		{"misspelt field", func(map[string]any) (int, any) { return 200, `{"requeueAfter": 5}` }, `the hook's answer is not valid: unknown field "requeueAfter"`},
		{"a field that is no name", func(map[string]any) (int, any) { return 200, `{"` + secret + ` and more": 5}` }, "the hook's answer is not valid: a field that is not known"},
		{"a field of the wrong type", func(map[string]any) (int, any) { return 200, `{"status": "` + secret + `"}` }, "the hook's answer is not valid: status is a JSON string"},
		{"child of a kind not listed", func(map[string]any) (int, any) {
			return 200, map[string]any{"children": []any{map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "s"}}}}
		}, `children[0] is a "v1" "Secret", which the Controller's spec.children does not list (it lists v1 ConfigMap)`},
		{"child in another namespace", func(map[string]any) (int, any) {
			return 200, map[string]any{"children": []any{map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "c", "namespace": "other"}}}}
		}, `children[0] is in namespace "other"`},
		{"status failing the schema", func(map[string]any) (int, any) {
			return 200, map[string]any{"status": map[string]any{"phase": "Exploded"}}
		}, "status.phase"},
		{"bad event", func(map[string]any) (int, any) {
			return 200, map[string]any{"events": []any{map[string]any{"type": "Error", "reason": "X"}}}
		}, `events[0].type is "Error"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := newRig(t)
			hook := newHook(t, func(req map[string]any) (int, any) {
				if req["object"].(map[string]any)["metadata"].(map[string]any)["name"] == "good" {
					return readyHook(req)
				}
				return tt.fn(req)
			})
			r.controller(t, "widgets", hook.URL, nil)
			r.widget(t, "bad", 1)
			r.widget(t, "good", 1)
			require.Eventually(t, func() bool {
				c := condition(r.get(t, widgets, "default", "bad"), "Synced")
				return c != nil && c["status"] == "False"
			}, 10*time.Second, 10*time.Millisecond)
			c := condition(r.get(t, widgets, "default", "bad"), "Synced")
			t.Logf("Synced=False: %s", c["message"])
			assert.Equal(t, "ReconcileError", c["reason"])
			assert.Contains(t, c["message"], tt.want)
			require.NotEmpty(t, r.events.find("bad", "ReconcileError"))
			assert.Contains(t, r.events.find("bad", "ReconcileError")[0].Message, tt.want)
			assert.NotContains(t, c["message"], secret)
			assert.NotContains(t, r.events.find("bad", "ReconcileError")[0].Message, secret)
			assert.Equal(t, events.TypeWarning, r.events.find("bad", "ReconcileError")[0].Type)
			assert.Nil(t, r.get(t, cache.GroupResource{Resource: "secrets"}, "default", "s"), "nothing of a bad answer is written")

			require.Eventually(t, func() bool { return phase(r.get(t, widgets, "default", "good")) == "Ready" }, 10*time.Second, 10*time.Millisecond,
				"the queue is not stuck: another object is reconciled")
			// Retried with a growing attempt number.
			require.Eventually(t, func() bool {
				h, _ := r.mgr.History(cache.Key{Group: widgets.Group, Resource: widgets.Resource, Namespace: "default", Name: "bad"})
				return len(h) >= 3 && h[2].Attempt == 3 && !h[2].Success
			}, 15*time.Second, 10*time.Millisecond)
		})
	}
}

func TestHookFinalizer(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	var release atomic.Bool
	hook := newHook(t, func(req map[string]any) (int, any) {
		if req["finalizing"] == true {
			return 200, map[string]any{"status": map[string]any{"phase": "Deleting"}, "finalized": release.Load(), "requeueAfterSeconds": 0.05}
		}
		return readyHook(req)
	})
	r.controller(t, "widgets", hook.URL, map[string]any{"finalize": true})
	r.widget(t, "w1", 1)
	require.Eventually(t, func() bool { return phase(r.get(t, widgets, "default", "w1")) == "Ready" }, 5*time.Second, 10*time.Millisecond)
	md := r.get(t, widgets, "default", "w1")["metadata"].(map[string]any)
	assert.Equal(t, []any{"controllers.opemu.dev/widgets"}, md["finalizers"])

	key := cache.Key{Group: widgets.Group, Resource: widgets.Resource, Namespace: "default", Name: "w1"}
	_, removed, err := r.client.Delete(context.Background(), key, cache.Preconditions{})
	require.NoError(t, err)
	require.False(t, removed, "the finalizer holds it")
	require.Eventually(t, func() bool { return phase(r.get(t, widgets, "default", "w1")) == "Deleting" }, 5*time.Second, 10*time.Millisecond)
	assert.True(t, hook.last()["finalizing"].(bool))
	release.Store(true)
	require.Eventually(t, func() bool { return r.get(t, widgets, "default", "w1") == nil }, 5*time.Second, 10*time.Millisecond)
	assert.NotEmpty(t, r.events.find("w1", "FinalizerRemoved"))
}

// TestControllerLifecycle: a Controller waits for its resource, changing its hook takes effect
// at once, deleting it stops its queue, and a reserved name is refused.
func TestControllerLifecycle(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	first := newHook(t, readyHook)
	second := newHook(t, func(req map[string]any) (int, any) {
		return 200, map[string]any{"status": map[string]any{"phase": "Pending"}}
	})
	// A Controller of a resource not served yet waits.
	r.create(t, hooks.Resource, "", map[string]any{"apiVersion": "controllers.opemu.dev/v1", "kind": "Controller", "metadata": map[string]any{"name": "gadgets"},
		"spec": map[string]any{"resource": map[string]any{"group": "test.opemu.dev", "version": "v1", "plural": "gadgets"}, "hook": map[string]any{"url": first.URL}}})
	require.Eventually(t, func() bool { return phase(r.get(t, hooks.Resource, "", "gadgets")) == hooks.PhaseWaiting }, 5*time.Second, 10*time.Millisecond)
	assert.Contains(t, condition(r.get(t, hooks.Resource, "", "gadgets"), "Ready")["message"], "test.opemu.dev/v1 gadgets is not served yet")

	r.controller(t, "application", first.URL, nil)
	require.Eventually(t, func() bool { return phase(r.get(t, hooks.Resource, "", "application")) == hooks.PhaseInvalid }, 5*time.Second, 10*time.Millisecond)
	assert.Contains(t, condition(r.get(t, hooks.Resource, "", "application"), "Ready")["message"], "taken by opemu's built-in controller")

	r.controller(t, "widgets", first.URL, nil)
	require.Eventually(t, func() bool { return phase(r.get(t, hooks.Resource, "", "widgets")) == hooks.PhaseRunning }, 5*time.Second, 10*time.Millisecond)
	r.widget(t, "w1", 1)
	require.Eventually(t, func() bool { return phase(r.get(t, widgets, "default", "w1")) == "Ready" }, 5*time.Second, 10*time.Millisecond)

	// A new hook URL: every object is reconciled by it at once.
	c := r.get(t, hooks.Resource, "", "widgets")
	c["spec"].(map[string]any)["hook"] = map[string]any{"url": second.URL}
	_, err := r.client.Update(context.Background(), cache.Key{Group: hooks.Resource.Group, Resource: hooks.Resource.Resource, Name: "widgets"}, c)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return phase(r.get(t, widgets, "default", "w1")) == "Pending" }, 5*time.Second, 10*time.Millisecond)

	// Deleted: once its queue has stopped, nothing calls a hook any more. The Manager learns
	// of the delete from its watch, after the DELETE is answered, and a call in flight then
	// finishes (as a stopping controller-runtime manager lets a reconcile finish), so the
	// claim is about objects the deleted Controller never saw.
	var ctrl *reconciler.Controller
	for _, c := range r.mgr.Controllers() {
		if c.Name() == "widgets" {
			ctrl = c
		}
	}
	require.NotNil(t, ctrl)
	_, _, err = r.client.Delete(context.Background(), cache.Key{Group: hooks.Resource.Group, Resource: hooks.Resource.Resource, Name: "widgets"}, cache.Preconditions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return !r.mgr.Reconciles(widgets) && !ctrl.Running() }, 5*time.Second, 10*time.Millisecond)
	r.widget(t, "w2", 1)
	assert.Never(t, func() bool { return first.calledFor("w2") || second.calledFor("w2") }, 300*time.Millisecond, 20*time.Millisecond)
}

// TestDeletedControllerReleasesFinalizers: deleting a Controller removes its finalizer from its
// objects, so a deletion never waits on a hook nobody calls any more.
func TestDeletedControllerReleasesFinalizers(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	hook := newHook(t, readyHook)
	r.controller(t, "widgets", hook.URL, map[string]any{"finalize": true})
	r.widget(t, "w1", 1)
	require.Eventually(t, func() bool {
		md := r.get(t, widgets, "default", "w1")["metadata"].(map[string]any)
		return md["finalizers"] != nil
	}, 5*time.Second, 10*time.Millisecond)
	_, _, err := r.client.Delete(context.Background(), cache.Key{Group: hooks.Resource.Group, Resource: hooks.Resource.Resource, Name: "widgets"}, cache.Preconditions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		md := r.get(t, widgets, "default", "w1")["metadata"].(map[string]any)
		fins, _ := md["finalizers"].([]any)
		return len(fins) == 0
	}, 5*time.Second, 10*time.Millisecond, "finalizers: %v", r.get(t, widgets, "default", "w1")["metadata"])
	_, removed, err := r.client.Delete(context.Background(), cache.Key{Group: widgets.Group, Resource: widgets.Resource, Namespace: "default", Name: "w1"}, cache.Preconditions{})
	require.NoError(t, err)
	assert.True(t, removed, "nothing holds the deletion")
}

// TestHookFailuresTellNoPorts: a hook URL that cannot be called fails the reconcile with the
// same report whatever failed at the connection (refused, a banner, a reset, TLS against plain
// HTTP, an untrusted certificate), in the Synced condition, the Event and the history alike.
func TestHookFailuresTellNoPorts(t *testing.T) {
	t.Parallel()
	urls := unreachable(t)
	var mu sync.Mutex
	reports := map[string]string{}
	t.Run("each", func(t *testing.T) {
		for name, url := range urls {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				r := newRig(t)
				r.controller(t, "widgets", url, nil)
				r.widget(t, "w", 1)
				require.Eventually(t, func() bool {
					c := condition(r.get(t, widgets, "default", "w"), "Synced")
					return c != nil && c["status"] == "False"
				}, 10*time.Second, 10*time.Millisecond)
				msg := condition(r.get(t, widgets, "default", "w"), "Synced")["message"].(string)
				assert.Equal(t, `calling the hook: Post "`+url+`": no answer (opemu's log has the cause)`, msg)
				require.NotEmpty(t, r.events.find("w", "ReconcileError"))
				assert.Equal(t, msg, r.events.find("w", "ReconcileError")[0].Message)
				h, _ := r.mgr.History(cache.Key{Group: widgets.Group, Resource: widgets.Resource, Namespace: "default", Name: "w"})
				require.NotEmpty(t, h)
				assert.Equal(t, msg, h[0].Message)
				mu.Lock()
				reports[name] = msg
				mu.Unlock()
			})
		}
	})
	sameReports(t, urls, reports)
}
