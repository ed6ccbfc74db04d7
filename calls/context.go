package calls

import (
	"context"
	"sync"
)

type reconcileKey struct{}

// WithReconcile returns ctx marked as the reconcile of key by an opemu controller or hook: the
// calls made with it are recorded with Call.Reconcile = key (exactly, whatever else runs).
func WithReconcile(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, reconcileKey{}, key)
}

// ReconcileOf returns the key WithReconcile marked ctx with ("" when none).
func ReconcileOf(ctx context.Context) string {
	k, _ := ctx.Value(reconcileKey{}).(string)
	return k
}

type annotationsKey struct{}

// annotations is a request's context carrying its Call, into which it collects the request's
// audit annotations (one allocation: the context layer is the collector).
type annotations struct {
	context.Context
	mu   sync.Mutex
	call *Call
}

func (a *annotations) Value(key any) any {
	if key == (annotationsKey{}) {
		return a
	}
	return a.Context.Value(key)
}

// WithAnnotations returns ctx carrying c, the Call of the request ctx serves, for
// AddAnnotations: the server gives it to the writes it records. c.Annotations must not be
// read until the request's admission has returned.
func WithAnnotations(ctx context.Context, c *Call) context.Context {
	return &annotations{Context: ctx, call: c}
}

// AddAnnotations adds m to the audit annotations of the call ctx serves (WithAnnotations), as
// kube-apiserver's admission adds an admission plugin's to the request's audit event; it does
// nothing when ctx carries no call. A key already added keeps its first value (kube-apiserver
// refuses to overwrite one). Safe for concurrent use.
func AddAnnotations(ctx context.Context, m map[string]string) {
	a, ok := ctx.Value(annotationsKey{}).(*annotations)
	if !ok || len(m) == 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.call.Annotations == nil {
		a.call.Annotations = make(map[string]string, len(m))
	}
	for k, v := range m {
		if _, dup := a.call.Annotations[k]; !dup {
			a.call.Annotations[k] = v
		}
	}
}
