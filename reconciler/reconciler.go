package reconciler

import (
	"context"
	"errors"
	"time"

	"github.com/opemu/opemu/cache"
)

// Result says what to do with a key after a successful reconcile.
type Result struct {
	// RequeueAfter, when positive, reconciles the key again after this long (a planned
	// requeue: it resets the failure count).
	RequeueAfter time.Duration
}

// Reconciler brings one object toward its desired state. It is called with the object's key;
// it reads the object itself (level-based) so any number of triggers collapse into one pass.
// The objects it reads are the store's (*cache.Object: immutable, shared with every reader and
// the controller's informer): a pass that needs the object as a tree decodes it once into a
// copy it owns, and changes only that.
type Reconciler interface {
	Reconcile(ctx context.Context, key cache.Key) (Result, error)
}

// Func adapts a function to Reconciler.
type Func func(ctx context.Context, key cache.Key) (Result, error)

// Reconcile calls f.
func (f Func) Reconcile(ctx context.Context, key cache.Key) (Result, error) { return f(ctx, key) }

var _ Reconciler = Func(nil)

// Dropper is implemented by reconcilers that want to know when a key is dropped after
// MaxRetries consecutive failures.
type Dropper interface {
	Dropped(ctx context.Context, key cache.Key, err error)
}

// Scheduler is implemented by reconcilers that pace their work: the controller enqueues a
// changed key no earlier than NotBefore(key), so a burst of changes collapses into one pass.
type Scheduler interface {
	NotBefore(key cache.Key) time.Time
}

// terminalError marks an error that must not be retried.
type terminalError struct{ err error }

func (e terminalError) Error() string { return e.err.Error() }
func (e terminalError) Unwrap() error { return e.err }

// TerminalError wraps err so the controller does not requeue the key.
func TerminalError(err error) error { return terminalError{err} }

func isTerminal(err error) bool {
	var t terminalError
	return errors.As(err, &t)
}
