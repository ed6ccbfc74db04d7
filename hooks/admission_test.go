package hooks_test

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opemu/opemu/app/apptest"
	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/hooks"
	"github.com/opemu/opemu/registry"
	"github.com/opemu/opemu/registry/registrytest"
	"github.com/opemu/opemu/webhooks"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// reviewFunc answers one AdmissionReview request.
type reviewFunc func(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse

// webhookServer is an HTTPS admission webhook server recording the reviews it gets.
type webhookServer struct {
	*httptest.Server
	caBundle []byte
	mu       sync.Mutex
	fns      map[string]reviewFunc // by path
	reviews  map[string][]*admissionv1.AdmissionRequest
}

func newWebhookServer(t *testing.T) *webhookServer {
	s := &webhookServer{fns: map[string]reviewFunc{}, reviews: map[string][]*admissionv1.AdmissionRequest{}}
	s.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
			http.Error(w, "bad review", http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		fn := s.fns[r.URL.Path]
		s.reviews[r.URL.Path] = append(s.reviews[r.URL.Path], review.Request)
		s.mu.Unlock()
		if fn == nil {
			http.NotFound(w, r)
			return
		}
		res := fn(review.Request)
		res.UID = review.Request.UID
		review.Request = nil
		review.Response = res
		_ = json.NewEncoder(w).Encode(review)
	}))
	s.caBundle = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw})
	t.Cleanup(s.Close)
	return s
}

func (s *webhookServer) handle(path string, fn reviewFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fns[path] = fn
}

func (s *webhookServer) got(path string) []*admissionv1.AdmissionRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*admissionv1.AdmissionRequest(nil), s.reviews[path]...)
}

// admissionRig is a core whose write path runs the configured webhooks.
type admissionRig struct {
	env    *registrytest.Env
	adm    *hooks.Admission
	client *registry.Client
}

func newAdmissionRig(t *testing.T) *admissionRig {
	t.Helper()
	chain := &webhooks.Chain{}
	env := apptest.New(t, apptest.Options{Options: registrytest.Options{Admission: chain}})
	adm, err := hooks.NewAdmission(hooks.AdmissionConfig{Client: env.Registry.Client("opemu-webhooks"), Kinds: env.Kinds})
	require.NoError(t, err)
	chain.Configured = adm
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = adm.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	r := &admissionRig{env: env, adm: adm, client: env.Registry.Client("test")}
	_, err = r.client.Create(context.Background(), cache.Key{Group: crds.Group, Resource: crds.Resource, Name: "widgets.test.opemu.dev"}, yamlObj(t, widgetCRD))
	require.NoError(t, err)
	return r
}

// configure stores a webhook configuration and waits until its webhooks are in the chain.
func (r *admissionRig) configure(t *testing.T, mutating bool, name string, hooksList ...map[string]any) {
	t.Helper()
	r.configureWith(t, r.client.Create, mutating, name, hooksList...)
}

// configureStored is configure, the configuration written straight to the store, past the
// write path's validation: as a webhook admissionregistration.k8s.io/v1 no longer accepts
// (sideEffects Unknown) was stored by an older version and is still served.
func (r *admissionRig) configureStored(t *testing.T, mutating bool, name string, hooksList ...map[string]any) {
	t.Helper()
	create := func(ctx context.Context, key cache.Key, obj map[string]any) (*cache.Object, error) {
		obj["metadata"].(map[string]any)["uid"] = "stored-" + name
		obj["metadata"].(map[string]any)["creationTimestamp"] = "2026-01-01T00:00:00Z"
		return r.env.Storage.Create(ctx, key, obj, cache.WriteOptions{})
	}
	r.configureWith(t, create, mutating, name, hooksList...)
}

func (r *admissionRig) configureWith(t *testing.T, create func(context.Context, cache.Key, map[string]any) (*cache.Object, error), mutating bool, name string, hooksList ...map[string]any) {
	t.Helper()
	kind, gr := "ValidatingWebhookConfiguration", hooks.ValidatingResource
	if mutating {
		kind, gr = "MutatingWebhookConfiguration", hooks.MutatingResource
	}
	whs := make([]any, len(hooksList))
	for i, h := range hooksList {
		whs[i] = h
	}
	m0, v0 := r.adm.Handlers()
	before := len(m0) + len(v0)
	_, err := create(context.Background(), cache.Key{Group: gr.Group, Resource: gr.Resource, Name: name}, map[string]any{
		"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind, "metadata": map[string]any{"name": name}, "webhooks": whs,
	})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		m, v := r.adm.Handlers()
		return len(m)+len(v) == before+len(hooksList)
	}, 5*time.Second, 5*time.Millisecond)
}

// webhook is one webhook of a configuration calling url, with rules for operations on
// resources of group.
func webhook(name, url string, ca []byte, group string, resources, operations []string, extra map[string]any) map[string]any {
	ops := make([]any, len(operations))
	for i, o := range operations {
		ops[i] = o
	}
	res := make([]any, len(resources))
	for i, x := range resources {
		res[i] = x
	}
	cc := map[string]any{"url": url}
	if ca != nil {
		cc["caBundle"] = ca // []byte encodes as base64, as the field is
	}
	w := map[string]any{
		"name": name, "clientConfig": cc, "sideEffects": "None", "admissionReviewVersions": []any{"v1"},
		"rules": []any{map[string]any{"operations": ops, "apiGroups": []any{group}, "apiVersions": []any{"*"}, "resources": res}},
	}
	for k, v := range extra {
		w[k] = v
	}
	return w
}

func (r *admissionRig) target(t *testing.T, group, version, plural, ns string) registry.Target {
	t.Helper()
	k, ok := r.env.Kinds.Lookup(group, version, plural)
	require.True(t, ok)
	gr := k.GroupResource()
	return registry.Target{Kind: k, Key: cache.Key{Group: gr.Group, Resource: gr.Resource, Namespace: ns}}
}

func configMap(name string, labels map[string]any, data map[string]any) map[string]any {
	md := map[string]any{"name": name}
	if labels != nil {
		md["labels"] = labels
	}
	return map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": md, "data": data}
}

func statusOf(t *testing.T, err error) metav1.Status {
	t.Helper()
	var se *apierrors.StatusError
	require.True(t, errors.As(err, &se), "want a Status error, got %v", err)
	return se.ErrStatus
}

func TestWebhooksMutateAndValidate(t *testing.T) {
	t.Parallel()
	r := newAdmissionRig(t)
	srv := newWebhookServer(t)
	srv.handle("/mutate", func(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		pt := admissionv1.PatchTypeJSONPatch
		return &admissionv1.AdmissionResponse{Allowed: true, PatchType: &pt, Warnings: []string{"defaulted by the test"},
			Patch: []byte(`[{"op":"add","path":"/metadata/labels","value":{"mutated":"yes"}},{"op":"add","path":"/data/extra","value":"1"}]`)}
	})
	srv.handle("/validate", func(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		var cm map[string]any
		_ = json.Unmarshal(req.Object.Raw, &cm)
		data, _ := cm["data"].(map[string]any)
		switch {
		case data["forbidden"] != nil:
			return &admissionv1.AdmissionResponse{Result: &metav1.Status{Code: 403, Reason: metav1.StatusReasonForbidden, Message: "no forbidden keys"}}
		case data["weird"] != nil:
			return &admissionv1.AdmissionResponse{Result: &metav1.Status{Code: 422, Reason: metav1.StatusReasonInvalid,
				Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: metav1.CauseTypeFieldValueInvalid, Field: "data.weird", Message: "not allowed"}}}}}
		}
		return &admissionv1.AdmissionResponse{Allowed: true}
	})
	r.configure(t, true, "defaults", webhook("default.test.opemu.dev", srv.URL+"/mutate", srv.caBundle, "", []string{"configmaps"}, []string{"CREATE"}, nil))
	// "//validate": envtest's WebhookInstallOptions join host and path with a slash of their
	// own; the path requested is the clean one, as kube-apiserver's client requests it.
	r.configure(t, false, "checks", webhook("check.test.opemu.dev", srv.URL+"//validate", srv.caBundle, "", []string{"configmaps"}, []string{"CREATE", "UPDATE"}, nil))

	tg := r.target(t, "", "v1", "configmaps", "default")
	res, err := r.env.Registry.Create(context.Background(), tg, configMap("cm", nil, map[string]any{"a": "b"}), registry.Options{User: "alice", FieldManager: "kubectl"})
	require.NoError(t, err)
	stored, err := res.Object.Decode()
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"mutated": "yes"}, stored["metadata"].(map[string]any)["labels"])
	assert.Equal(t, map[string]any{"a": "b", "extra": "1"}, stored["data"])
	assert.Contains(t, res.Warnings, "defaulted by the test")

	reviews := srv.got("/mutate")
	require.Len(t, reviews, 1)
	rv := reviews[0]
	assert.NotEmpty(t, rv.UID)
	assert.Equal(t, metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, rv.Kind)
	assert.Equal(t, metav1.GroupVersionResource{Version: "v1", Resource: "configmaps"}, rv.Resource)
	assert.Equal(t, &rv.Kind, rv.RequestKind)
	assert.Equal(t, "cm", rv.Name)
	assert.Equal(t, "default", rv.Namespace)
	assert.Equal(t, admissionv1.Create, rv.Operation)
	assert.Equal(t, "alice", rv.UserInfo.Username)
	assert.False(t, *rv.DryRun)
	assert.JSONEq(t, `{"apiVersion":"meta.k8s.io/v1","kind":"CreateOptions","fieldManager":"kubectl"}`, string(rv.Options.Raw))
	// The validating webhook sees the mutated object, after the schema.
	v := srv.got("/validate")
	require.Len(t, v, 1)
	assert.Contains(t, string(v[0].Object.Raw), `"mutated":"yes"`)

	_, err = r.env.Registry.Create(context.Background(), tg, configMap("bad", nil, map[string]any{"forbidden": "x"}), registry.Options{})
	st := statusOf(t, err)
	assert.Equal(t, int32(403), st.Code)
	assert.Equal(t, metav1.StatusReasonForbidden, st.Reason)
	assert.Equal(t, `admission webhook "check.test.opemu.dev" denied the request: no forbidden keys`, st.Message)
	_, err = r.env.Registry.Create(context.Background(), tg, configMap("weird", nil, map[string]any{"weird": "x"}), registry.Options{})
	st = statusOf(t, err)
	assert.Equal(t, int32(422), st.Code, "the webhook's own code")
	assert.Equal(t, `admission webhook "check.test.opemu.dev" denied the request: Invalid`, st.Message)
	require.NotNil(t, st.Details)
	assert.Equal(t, []metav1.StatusCause{{Type: metav1.CauseTypeFieldValueInvalid, Field: "data.weird", Message: "not allowed"}}, st.Details.Causes, "the webhook's causes reach the client")
	_, err = r.client.Get(context.Background(), cache.Key{Resource: "configmaps", Namespace: "default", Name: "bad"})
	assert.ErrorIs(t, err, cache.ErrNotFound, "a denied write stores nothing")

	// UPDATE carries the old object; an update the webhook refuses changes nothing.
	cur, err := res.Object.Decode()
	require.NoError(t, err)
	cur["data"] = map[string]any{"forbidden": "now"}
	_, err = r.env.Registry.Update(context.Background(), registry.Target{Kind: tg.Kind, Key: cache.Key{Resource: "configmaps", Namespace: "default", Name: "cm"}}, cur, registry.Options{})
	assert.Equal(t, int32(403), statusOf(t, err).Code)
	v = srv.got("/validate")
	last := v[len(v)-1]
	assert.Equal(t, admissionv1.Update, last.Operation)
	assert.Contains(t, string(last.OldObject.Raw), `"a":"b"`)
	assert.JSONEq(t, `{"apiVersion":"meta.k8s.io/v1","kind":"UpdateOptions"}`, string(last.Options.Raw))
}

func TestWebhookFailurePolicy(t *testing.T) {
	t.Parallel()
	r := newAdmissionRig(t)
	// A port nobody listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	down := "https://" + ln.Addr().String() + "/validate"
	require.NoError(t, ln.Close())
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}))
	t.Cleanup(hang.Close)

	tg := r.target(t, "", "v1", "configmaps", "default")
	r.configure(t, false, "lenient", webhook("lenient.test.opemu.dev", down, nil, "", []string{"configmaps"}, []string{"*"}, map[string]any{"failurePolicy": "Ignore"}))
	_, err = r.env.Registry.Create(context.Background(), tg, configMap("through", nil, nil), registry.Options{})
	require.NoError(t, err, "failurePolicy Ignore lets writes through while the webhook is down")

	r.configure(t, false, "strict", webhook("strict.test.opemu.dev", down, nil, "", []string{"configmaps"}, []string{"CREATE"}, nil))
	_, err = r.env.Registry.Create(context.Background(), tg, configMap("refused", nil, nil), registry.Options{})
	st := statusOf(t, err)
	assert.Equal(t, int32(500), st.Code)
	assert.Equal(t, metav1.StatusReasonInternalError, st.Reason)
	assert.Contains(t, st.Message, `Internal error occurred: failed calling webhook "strict.test.opemu.dev": failed to call webhook: Post "`+down+`?timeout=10s": no answer`)

	r.configure(t, false, "slow", webhook("slow.test.opemu.dev", hang.URL, nil, "", []string{"secrets"}, []string{"CREATE"}, map[string]any{"timeoutSeconds": 1}))
	start := time.Now()
	_, err = r.env.Registry.Create(context.Background(), r.target(t, "", "v1", "secrets", "default"),
		map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "s"}}, registry.Options{})
	assert.Less(t, time.Since(start), 3*time.Second, "timeoutSeconds bounds the call")
	st = statusOf(t, err)
	assert.Equal(t, int32(500), st.Code)
	assert.Contains(t, st.Message, "no answer within 1s (timeoutSeconds)")

	// Webhook configurations are never judged: the broken one can be removed.
	_, _, err = r.client.Delete(context.Background(), cache.Key{Group: hooks.ValidatingResource.Group, Resource: hooks.ValidatingResource.Resource, Name: "strict"}, cache.Preconditions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := r.env.Registry.Create(context.Background(), tg, configMap("again", nil, nil), registry.Options{})
		return err == nil
	}, 5*time.Second, 10*time.Millisecond)
}

func TestWebhookDryRun(t *testing.T) {
	t.Parallel()
	r := newAdmissionRig(t)
	srv := newWebhookServer(t)
	allow := func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		return &admissionv1.AdmissionResponse{Allowed: true}
	}
	srv.handle("/none", allow)
	srv.handle("/unknown", allow)
	r.configure(t, false, "none", webhook("none.test.opemu.dev", srv.URL+"/none", srv.caBundle, "", []string{"configmaps"}, []string{"CREATE"}, nil))
	tg := r.target(t, "", "v1", "configmaps", "default")
	_, err := r.env.Registry.Create(context.Background(), tg, configMap("dry", nil, nil), registry.Options{DryRun: true})
	require.NoError(t, err)
	got := srv.got("/none")
	require.Len(t, got, 1, "sideEffects None: a dry run reaches the webhook")
	assert.True(t, *got[0].DryRun)

	// admissionregistration.k8s.io/v1 refuses sideEffects Unknown; one stored before still judges.
	r.configureStored(t, false, "unknown", webhook("unknown.test.opemu.dev", srv.URL+"/unknown", srv.caBundle, "", []string{"configmaps"}, []string{"CREATE"}, map[string]any{"sideEffects": "Unknown"}))
	_, err = r.env.Registry.Create(context.Background(), tg, configMap("dry", nil, nil), registry.Options{DryRun: true})
	st := statusOf(t, err)
	assert.Equal(t, int32(400), st.Code)
	assert.Equal(t, `admission webhook "unknown.test.opemu.dev" does not support dry run`, st.Message)
	assert.Empty(t, srv.got("/unknown"), "refused before any call")
	_, err = r.env.Registry.Create(context.Background(), tg, configMap("wet", nil, nil), registry.Options{})
	require.NoError(t, err, "a real write calls it")
	assert.Len(t, srv.got("/unknown"), 1)
}

func TestWebhookDeleteAndStatus(t *testing.T) {
	t.Parallel()
	r := newAdmissionRig(t)
	srv := newWebhookServer(t)
	srv.handle("/delete", func(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		if strings.Contains(string(req.OldObject.Raw), `"protected":"true"`) {
			return &admissionv1.AdmissionResponse{Result: &metav1.Status{Code: 403, Message: "protected"}}
		}
		return &admissionv1.AdmissionResponse{Allowed: true}
	})
	srv.handle("/status", func(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		return &admissionv1.AdmissionResponse{Allowed: false, Result: &metav1.Status{Message: "status is frozen"}}
	})
	r.configure(t, false, "deletes", webhook("delete.test.opemu.dev", srv.URL+"/delete", srv.caBundle, "", []string{"configmaps"}, []string{"DELETE"}, nil))
	r.configure(t, false, "status", webhook("status.test.opemu.dev", srv.URL+"/status", srv.caBundle, "test.opemu.dev", []string{"widgets/status"}, []string{"UPDATE"}, nil))

	tg := r.target(t, "", "v1", "configmaps", "default")
	for _, name := range []string{"keep", "drop"} {
		_, err := r.env.Registry.Create(context.Background(), tg, configMap(name, map[string]any{"protected": map[bool]string{true: "true", false: "false"}[name == "keep"]}, nil), registry.Options{})
		require.NoError(t, err)
	}
	assert.Empty(t, srv.got("/delete"), "CREATE does not match a DELETE rule")
	one := tg
	one.Key.Name = "keep"
	_, _, err := r.env.Registry.Delete(context.Background(), one, cache.Preconditions{}, registry.Options{})
	st := statusOf(t, err)
	assert.Equal(t, int32(403), st.Code)
	assert.Contains(t, st.Message, "protected")
	one.Key.Name = "drop"
	_, removed, err := r.env.Registry.Delete(context.Background(), one, cache.Preconditions{}, registry.Options{})
	require.NoError(t, err)
	assert.True(t, removed)
	d := srv.got("/delete")
	require.Len(t, d, 2)
	assert.Equal(t, admissionv1.Delete, d[1].Operation)
	assert.Empty(t, d[1].Object.Raw, "a DELETE has no object")
	assert.Contains(t, string(d[1].Options.Raw), `"kind":"DeleteOptions"`)

	// A rule naming widgets/status judges status writes, not the main resource.
	wt := r.target(t, "test.opemu.dev", "v1", "widgets", "default")
	res, err := r.env.Registry.Create(context.Background(), wt, map[string]any{"apiVersion": "test.opemu.dev/v1", "kind": "Widget", "metadata": map[string]any{"name": "w"}}, registry.Options{})
	require.NoError(t, err)
	w, err := res.Object.Decode()
	require.NoError(t, err)
	w["status"] = map[string]any{"phase": "Ready"}
	st1 := registry.Target{Kind: wt.Kind, Key: cache.Key{Group: wt.Key.Group, Resource: wt.Key.Resource, Namespace: "default", Name: "w"}, Sub: "status"}
	_, err = r.env.Registry.Update(context.Background(), st1, w, registry.Options{})
	st = statusOf(t, err)
	assert.Equal(t, `admission webhook "status.test.opemu.dev" denied the request: status is frozen`, st.Message)
	got := srv.got("/status")
	require.Len(t, got, 1)
	assert.Equal(t, "status", got[0].SubResource)
}

func TestWebhookSelectors(t *testing.T) {
	t.Parallel()
	r := newAdmissionRig(t)
	srv := newWebhookServer(t)
	deny := func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		return &admissionv1.AdmissionResponse{Result: &metav1.Status{Code: 403, Message: "denied"}}
	}
	srv.handle("/ns", deny)
	srv.handle("/obj", deny)
	r.configure(t, false, "by-namespace", webhook("ns.test.opemu.dev", srv.URL+"/ns", srv.caBundle, "", []string{"configmaps"}, []string{"CREATE"},
		map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"env": "prod"}}}))
	r.configure(t, false, "by-object", webhook("obj.test.opemu.dev", srv.URL+"/obj", srv.caBundle, "", []string{"secrets"}, []string{"CREATE"},
		map[string]any{"objectSelector": map[string]any{"matchExpressions": []any{map[string]any{"key": "guarded", "operator": "Exists"}}}}))
	_, err := r.client.Create(context.Background(), cache.Key{Resource: "namespaces", Name: "prod"},
		map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "prod", "labels": map[string]any{"env": "prod"}}})
	require.NoError(t, err)

	_, err = r.env.Registry.Create(context.Background(), r.target(t, "", "v1", "configmaps", "default"), configMap("a", nil, nil), registry.Options{})
	require.NoError(t, err, "default has no env=prod label")
	_, err = r.env.Registry.Create(context.Background(), r.target(t, "", "v1", "configmaps", "prod"), configMap("a", nil, nil), registry.Options{})
	assert.Equal(t, int32(403), statusOf(t, err).Code)

	secret := func(name string, labels map[string]any) map[string]any {
		return map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": name, "labels": labels}}
	}
	_, err = r.env.Registry.Create(context.Background(), r.target(t, "", "v1", "secrets", "default"), secret("free", map[string]any{"x": "y"}), registry.Options{})
	require.NoError(t, err)
	_, err = r.env.Registry.Create(context.Background(), r.target(t, "", "v1", "secrets", "default"), secret("kept", map[string]any{"guarded": ""}), registry.Options{})
	assert.Equal(t, int32(403), statusOf(t, err).Code)
	assert.Len(t, srv.got("/obj"), 1)
}

// TestWebhookExemptions: a webhook matching everything, down, with failurePolicy Fail, does not
// stop opemu's own Events, nor changes to the webhook configurations.
func TestWebhookExemptions(t *testing.T) {
	t.Parallel()
	r := newAdmissionRig(t)
	r.configure(t, false, "everything", webhook("all.test.opemu.dev", "https://127.0.0.1:1/x", nil, "*", []string{"*/*"}, []string{"*"}, nil))
	_, err := r.env.Registry.Create(context.Background(), r.target(t, "", "v1", "configmaps", "default"), configMap("c", nil, nil), registry.Options{})
	assert.Equal(t, int32(500), statusOf(t, err).Code, "client writes are judged")
	_, err = r.client.Create(context.Background(), cache.Key{Resource: "events", Namespace: "default", Name: "e1"}, map[string]any{
		"apiVersion": "v1", "kind": "Event", "metadata": map[string]any{"name": "e1"},
		"involvedObject": map[string]any{"kind": "ConfigMap", "name": "c", "namespace": "default"}, "reason": "Test",
	})
	require.NoError(t, err, "opemu's own Events are not sent to webhooks")
	_, err = r.client.Create(context.Background(), cache.Key{Group: hooks.MutatingResource.Group, Resource: hooks.MutatingResource.Resource, Name: "m"}, map[string]any{
		"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration", "metadata": map[string]any{"name": "m"},
	})
	require.NoError(t, err, "webhook configurations are not sent to webhooks")
}

// TestWebhookMatchPolicy: a rule naming only v2 of a resource judges writes of v1 under
// matchPolicy Equivalent (sent as v2, with requestKind v1), not under Exact.
func TestWebhookMatchPolicy(t *testing.T) {
	t.Parallel()
	r := newAdmissionRig(t)
	_, err := r.client.Create(context.Background(), cache.Key{Group: crds.Group, Resource: crds.Resource, Name: "gadgets.test.opemu.dev"}, yamlObj(t, `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.test.opemu.dev}
spec:
  group: test.opemu.dev
  scope: Namespaced
  names: {kind: Gadget, listKind: GadgetList, plural: gadgets, singular: gadget}
  versions:
  - {name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}
  - {name: v2, served: true, storage: false, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}
`))
	require.NoError(t, err)
	srv := newWebhookServer(t)
	allow := func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		return &admissionv1.AdmissionResponse{Allowed: true}
	}
	srv.handle("/equivalent", allow)
	srv.handle("/exact", allow)
	rule := func(url string, policy string) map[string]any {
		w := webhook(strings.ToLower(policy)+".test.opemu.dev", url, srv.caBundle, "test.opemu.dev", []string{"gadgets"}, []string{"CREATE"}, map[string]any{"matchPolicy": policy})
		w["rules"].([]any)[0].(map[string]any)["apiVersions"] = []any{"v2"}
		return w
	}
	r.configure(t, false, "policies", rule(srv.URL+"/equivalent", "Equivalent"), rule(srv.URL+"/exact", "Exact"))
	_, err = r.env.Registry.Create(context.Background(), r.target(t, "test.opemu.dev", "v1", "gadgets", "default"),
		map[string]any{"apiVersion": "test.opemu.dev/v1", "kind": "Gadget", "metadata": map[string]any{"name": "g"}}, registry.Options{})
	require.NoError(t, err)
	assert.Empty(t, srv.got("/exact"))
	got := srv.got("/equivalent")
	require.Len(t, got, 1)
	assert.Equal(t, "v2", got[0].Kind.Version)
	assert.Equal(t, "v1", got[0].RequestKind.Version)
	assert.Contains(t, string(got[0].Object.Raw), `"apiVersion":"test.opemu.dev/v2"`)
}

// TestWebhookScale: a rule naming deployments/scale gets autoscaling/v1 Scale objects, and its
// patch of the Scale sets the Deployment's replicas.
func TestWebhookScale(t *testing.T) {
	t.Parallel()
	r := newAdmissionRig(t)
	srv := newWebhookServer(t)
	srv.handle("/scale", func(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		pt := admissionv1.PatchTypeJSONPatch
		return &admissionv1.AdmissionResponse{Allowed: true, PatchType: &pt, Patch: []byte(`[{"op":"replace","path":"/spec/replicas","value":4}]`)}
	})
	r.configure(t, true, "scale", webhook("scale.test.opemu.dev", srv.URL+"/scale", srv.caBundle, "apps", []string{"deployments/scale"}, []string{"UPDATE"}, nil))
	dt := r.target(t, "apps", "v1", "deployments", "default")
	_, err := r.env.Registry.Create(context.Background(), dt, map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "d"},
		"spec": map[string]any{"replicas": json.Number("1"), "selector": map[string]any{"matchLabels": map[string]any{"app": "d"}},
			"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "d"}}, "spec": map[string]any{"containers": []any{map[string]any{"name": "c", "image": "nginx"}}}}},
	}, registry.Options{})
	require.NoError(t, err)
	assert.Empty(t, srv.got("/scale"), "the main resource is not judged")
	st := dt
	st.Key.Name, st.Sub = "d", "scale"
	res, err := r.env.Registry.Update(context.Background(), st, map[string]any{"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": map[string]any{"name": "d"}, "spec": map[string]any{"replicas": json.Number("2")}}, registry.Options{})
	require.NoError(t, err)
	got := srv.got("/scale")
	require.Len(t, got, 1)
	assert.Equal(t, metav1.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"}, got[0].Kind)
	assert.Equal(t, "scale", got[0].SubResource)
	assert.Contains(t, string(got[0].Object.Raw), `"replicas":2`)
	assert.Contains(t, string(got[0].OldObject.Raw), `"replicas":1`)
	d, err := res.Object.Decode()
	require.NoError(t, err)
	assert.Equal(t, json.Number("4"), d["spec"].(map[string]any)["replicas"], "the webhook's patch of the Scale")
}

// TestWebhookFailuresEchoNothing: a webhook URL may reach any service, so a failed call
// refuses the write with the status code and a fixed reason, as kube-apiserver reports a
// status without a Status body: never what the service answered, nor how its connection
// failed (which would tell open ports from closed ones).
func TestWebhookFailuresEchoNothing(t *testing.T) {
	t.Parallel()
	r := newAdmissionRig(t)
	answering := func(code int, body string) string {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(code)
			_, _ = io.WriteString(w, body)
		}))
		t.Cleanup(s.Close)
		return s.URL + "/hook"
	}
	call := func(name, url string) string {
		r.configure(t, false, name, webhook(name+".test.opemu.dev", url, nil, "", []string{"configmaps"}, []string{"CREATE"},
			map[string]any{"timeoutSeconds": 2, "objectSelector": map[string]any{"matchLabels": map[string]any{"case": name}}}))
		_, err := r.env.Registry.Create(context.Background(), r.target(t, "", "v1", "configmaps", "default"),
			configMap(name, map[string]any{"case": name}, nil), registry.Options{})
		st := statusOf(t, err)
		assert.Equal(t, int32(500), st.Code, "%s: %s", name, st.Message)
		assert.NotContains(t, st.Message, secret, name)
		for _, c := range causes(st) {
			assert.NotContains(t, c, secret, name)
		}
		return st.Message
	}

	answers := []struct{ name, url, want string }{
		{"error", answering(500, "database on fire "+secret), `failed calling webhook "error.test.opemu.dev": failed to call webhook: Post "URL?timeout=2s": HTTP 500 Internal Server Error`},
		{"text", answering(200, "<html>"+secret+"</html>"), "the answer is not an AdmissionReview: not JSON"},
		{"object", answering(200, `{"apiVersion":"`+secret+`","kind":"Status"}`), "the answer is not an admission.k8s.io/v1 AdmissionReview"},
		{"wrong type", answering(200, `{"response":"`+secret+`"}`), "the answer is not an AdmissionReview: response is a JSON string"},
		{"uid", answering(200, `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"`+secret+`","allowed":true}}`), "got another"},
	}
	for _, a := range answers {
		msg := call(strings.ReplaceAll(a.name, " ", "-"), a.url)
		assert.Contains(t, strings.ReplaceAll(msg, a.url, "URL"), a.want, a.name)
	}

	urls := unreachable(t)
	reports := map[string]string{}
	for name, url := range urls {
		reports[name] = call(strings.ReplaceAll(name, " ", "-"), url)
		// The name of the webhook differs; the rest may not.
		reports[name] = strings.ReplaceAll(reports[name], strings.ReplaceAll(name, " ", "-")+".test", "NAME.test")
	}
	sameReports(t, urls, reports)
	assert.Contains(t, reports["closed port"], `failed to call webhook: Post "`+urls["closed port"]+`?timeout=2s": no answer (opemu's log has the cause)`)
}

// causes are the messages of a Status's causes.
func causes(st metav1.Status) []string {
	if st.Details == nil {
		return nil
	}
	var out []string
	for _, c := range st.Details.Causes {
		out = append(out, c.Message)
	}
	return out
}
