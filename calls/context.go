package calls

import "context"

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
