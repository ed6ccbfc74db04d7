package hooks

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/kinds"
	"github.com/opemu/opemu/webhooks"
)

// FuzzHookAnswer: whatever a reconcile hook answers, decoding and checking it never panics,
// and an answer that passes gives every child a name, the parent's namespace and a controller
// reference to the parent.
func FuzzHookAnswer(f *testing.F) {
	for _, s := range []string{
		`{}`,
		`{"status":{"phase":"Ready"},"children":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"a":"b"}}],"requeueAfterSeconds":1.5,"events":[{"reason":"R"}],"finalized":true}`,
		`{"children":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","ownerReferences":[{"uid":"x"},null,3]}}]}`,
		`{"children":[null]}`, `{"children":[{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"}}]}`,
		`{"requeueAfterSeconds":-1}`, `{"events":[{"type":"Error"}]}`, `[]`, `null`, `{"status":3}`, `{} {}`,
	} {
		f.Add([]byte(s))
	}
	served := kinds.New()
	store := cache.New(cache.Config{})
	defer store.Close()
	parent, err := store.Create(context.Background(), cache.Key{Resource: "configmaps", Namespace: "default", Name: "p"},
		map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "p", "namespace": "default", "uid": "parent-uid"}}, cache.WriteOptions{})
	if err != nil {
		f.Fatal(err)
	}
	parentKind, _ := served.Lookup("", "v1", "configmaps")
	child, _ := served.Lookup("", "v1", "configmaps")
	r := &hookReconciler{m: &Manager{cfg: Config{Kinds: served}}}
	f.Fuzz(func(t *testing.T, raw []byte) {
		ans, err := decodeAnswer(raw)
		if err != nil {
			return
		}
		if _, err := checkEvents(ans.Events); err != nil {
			return
		}
		desired, err := r.desiredChildren(parentKind, parent, []*kinds.Kind{child}, ans.Children)
		if err != nil {
			return
		}
		for _, d := range desired {
			if d.key.Name == "" || d.key.Namespace != "default" || !controlledBy(d.obj, parent.UID()) {
				t.Fatalf("a child that passed the checks: %v %v", d.key, d.obj)
			}
		}
	})
}

// FuzzWebhookAnswer: whatever an admission webhook answers, reading it and applying its patch
// through the chain never panics; a denial is worded with the webhook's name and a failure code.
func FuzzWebhookAnswer(f *testing.F) {
	for _, s := range []string{
		`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"u","allowed":true}}`,
		`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"u","allowed":false,"status":{"code":200}}}`,
		`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"u","allowed":true,"patchType":"JSONPatch","patch":"W3sib3AiOiJhZGQiLCJwYXRoIjoiL2EiLCJ2YWx1ZSI6MX1d"}}`,
		`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"u","allowed":true,"patchType":"JSONPatch","patch":"W3sib3AiOiJtb3ZlIiwiZnJvbSI6Ii9iIiwicGF0aCI6Ii9jIn1d"}}`,
		`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"v","allowed":true}}`,
		`{}`, `garbage`,
	} {
		f.Add([]byte(s))
	}
	w := &webhook{a: &Admission{log: slog.New(slog.DiscardHandler)}, name: "fuzz.opemu.test", mutating: true}
	f.Fuzz(func(t *testing.T, raw []byte) {
		res, err := w.answer(raw, "u")
		if err != nil {
			return
		}
		if !res.Allowed {
			if res.Result == nil || res.Result.Code < http.StatusBadRequest || !strings.HasPrefix(res.Result.Message, `admission webhook "fuzz.opemu.test" denied the request`) {
				t.Fatalf("a denial worded otherwise: %+v", res.Result)
			}
			return
		}
		chain := &webhooks.Chain{Mutating: []webhooks.Named{{Name: w.name, External: true,
			Handler: webhooks.HandlerFunc(func(context.Context, *webhooks.Request) webhooks.Response { return res })}}}
		req := &webhooks.Request{Operation: webhooks.Create, Object: map[string]any{"b": map[string]any{"x": "y"}, "metadata": map[string]any{"name": "o"}}}
		_, _ = chain.Mutate(context.Background(), req)
	})
}
