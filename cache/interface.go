package cache

import (
	"context"
	"time"
)

// Interface is the storage contract, in the shape of kube-apiserver's storage.Interface: one
// versioned key space with get, list, watch, create, delete and one guaranteed-update primitive.
// It owns resourceVersions and their order; it knows nothing of an object's meaning beyond the
// few metadata fields it indexes (see Object). The rules of objects (uid, timestamps,
// generation, finalizers, namespaces) belong to the layer above (package registry), which
// calls GuaranteedUpdate for every change of an existing object.
//
// Store (in memory) implements it; cachetest.RunConformance checks any implementation.
//
// Who assigns versions: the implementation, one store-wide counter, strictly increasing, one
// version per write (Store: its own counter; package etcd: etcd's revision, which the writes
// of one transaction share: a group commit of Events, a lease's expiry). When a write is
// visible: a write is visible to every Get, List and Watch of this Interface once the call that
// made it has returned; to the reads of another Interface over the same truth (another replica)
// once that one's WaitUntilFresh has returned. What a watcher is promised: every committed
// write after its starting version that matches its options, exactly once, in version order,
// or a closed channel and an error saying why (never a silent gap); the writes of its starting
// version again when it shares it with others (WatchOptions.ResourceVersion).
type Interface interface {
	// Get returns the object at key, or an error wrapping ErrNotFound.
	Get(ctx context.Context, key Key) (*Object, error)
	// List returns the objects of gr matching opts, in key order, with the version the list
	// was read at.
	List(ctx context.Context, gr GroupResource, opts ...ListOption) (ListResult, error)
	// Watch streams the changes matching opts after opts.ResourceVersion (see WatchOptions).
	Watch(ctx context.Context, opts WatchOptions) (*Watcher, error)
	// Create stores obj at key (an ADDED event) and returns the stored object; ErrAlreadyExists
	// if key exists. The store takes ownership of obj and sets metadata.resourceVersion; every
	// other field is stored as given. key.Name must not be empty.
	Create(ctx context.Context, key Key, obj map[string]any, opts WriteOptions) (*Object, error)
	// Delete removes the object at key if pre holds (a DELETED event carrying the removal's
	// version) and returns it as removed.
	Delete(ctx context.Context, key Key, pre Preconditions, opts WriteOptions) (*Object, error)
	// GuaranteedUpdate reads the object at key, checks pre, calls try with it and commits what
	// try returns if the object is still the one try saw; when another write won meanwhile it
	// reads again and calls try again. This is the only retry loop of a write: try holds every
	// rule and check of the update, so it runs once per attempt. An error from try ends the
	// update with that error. An update whose result encodes exactly like the current object is
	// no write: the current object is returned and no event is sent.
	GuaranteedUpdate(ctx context.Context, key Key, pre Preconditions, try UpdateFunc, opts WriteOptions) (*Object, error)
	// DropResource removes every object of gr at once (a DELETED event each) and ends the
	// watches on gr alone, as deleting a CRD does. It returns how many objects went.
	DropResource(ctx context.Context, gr GroupResource) (int, error)
	// Encode returns obj (its metadata.resourceVersion ignored) encoded and indexed as this
	// store keeps objects, without storing it, for Restore. The store takes ownership of obj.
	Encode(key Key, obj map[string]any) (*Object, error)
	// Restore replaces every object the store holds with objects, as one change: each is
	// stored as it is (uid, timestamps, finalizers, status: everything) but for
	// metadata.resourceVersion, which becomes a version after every version the store issued
	// before (versions move forward; none is reused). It returns the version the restored state
	// is at: a list then carries it, and a watch may start from it. Every open watch ends with
	// an error wrapping ErrGone (its client lists again), and no watch or paged list may resume
	// from a version before it. objects come from this store's Encode or Get, List and Watch,
	// or from those of a store with the same Config.SelectableFields; a key given twice, or
	// without a name, is ErrInvalid and nothing is restored.
	Restore(ctx context.Context, objects []*Object, opts RestoreOptions) (uint64, error)
	// ResourceVersion is the version of the latest write.
	ResourceVersion() uint64
	// StartResourceVersion is the first version this store may have issued; versions below it
	// come from an earlier run and are never served.
	StartResourceVersion() uint64
	// CheckResourceVersion reports whether every change after rv to grs (every resource when
	// none) can still be replayed: nil, or an error wrapping ErrGone.
	CheckResourceVersion(rv uint64, grs ...GroupResource) error
	// WaitUntilFresh returns once this Interface's reads reflect every write committed before
	// the call, anywhere (rv 0: a consistent read), or the write of version rv: nil, or an
	// error wrapping ErrTimeout when they do not within a bound or rv is beyond every write so
	// far, ErrUnavailable when the truth cannot be asked. Reads without it see what this
	// Interface holds now (Kubernetes' resourceVersion "0"). Store's reads are always fresh.
	WaitUntilFresh(ctx context.Context, rv uint64) error
	// Counts returns the object counts per resource and namespace.
	Counts() []ResourceCount
	// Close ends every watch (ErrClosed) and refuses further writes. It is idempotent.
	Close()
}

// UpdateFunc computes the next state of cur for GuaranteedUpdate. It may be called more than
// once, each time with a newer cur; cur is immutable and shared.
type UpdateFunc func(cur *Object) (Update, error)

// Update is what an UpdateFunc decides.
type Update struct {
	// Object is the next state; the store takes ownership and sets its resourceVersion.
	Object map[string]any
	// Remove removes the object instead (the last finalizer of an object being deleted went,
	// or a delete). Its DELETED event carries Object, or the current state when Object is nil.
	Remove bool
}

// Preconditions must hold for a write to proceed (ErrConflict otherwise). Empty means any.
type Preconditions struct {
	UID             string
	ResourceVersion string
}

// WriteOptions modify a create, update or delete.
type WriteOptions struct {
	// DryRun runs every check and returns the would-be result without storing anything,
	// bumping the counter or emitting an event. A dry-run create's result has no
	// resourceVersion.
	DryRun bool
	// TTL, when not zero, makes the object expire (a DELETED event) that long after this write
	// unless it is written again, as kube-apiserver stores Events (an etcd lease). Store ignores
	// it: there the Events' recorder expires them.
	TTL time.Duration
}

// RestoreOptions modify a Restore.
type RestoreOptions struct {
	// TTL, when set, gives the restored objects of each resource the WriteOptions.TTL a write
	// of them has (zero: none). Store ignores it, as it ignores WriteOptions.TTL.
	TTL func(gr GroupResource) time.Duration
}

var _ Interface = (*Store)(nil)
